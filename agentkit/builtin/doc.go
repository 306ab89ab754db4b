// Package builtin holds the Go workers compiled into the ioa binary, so a
// configuration can give an agent real skills without a model or a program
// of its own: arithmetic, unit conversion, text statistics, reading files
// from a sandbox folder and writing a Markdown report from earlier results.
// The demo team is made of them.
//
// The calculator and the unit converter answer every expression or
// conversion in the task's own text (its first paragraph; later ones carry
// earlier tasks' results), joined by "; ", so that a task asking for two
// things is not reported done having answered one. The calculator also
// reads arithmetic said in words ("divide 100 by 8", "add 12 and 30", "the
// square root of 144", "2 to the power of 10", "2 to the 10th power") as
// the expression it means, a percentage as a factor ("10% of 50% of 200 +
// 3" is 13, "20 percent of 55 plus 3" is 14, "15% tip on 84.50" is
// 12.675) and a percentage added or taken off as a percentage of what it
// is added to ("50 + 10%" is 55, "add 15% VAT to 200", "20% off 80",
// "increase 80 by 25%", "10% more than 50", "… then subtract 10%"), what
// percentage one number is of another, a fraction of a number ("1/3 of 90", "half of 90",
// "halve 56", "split a 90 euro bill between 4 people"), a price ("3 nights
// at 90 euros" is 270), a count of packs ("3 boxes of 12 eggs" is 36), an area
// ("a rectangle 5 by 8", "a 4 m by 5 m room": "by" multiplies only beside
// a shape), a factorial ("7!", "7 factorial"), a remainder
// ("the remainder of 17 divided by 5", "17 mod 5" is 2), an operation over
// a list ("the average of 3, 5 and 10", "the sum of 1, 2, 3 and 4", "add
// 17, 25 and 38", "sum 4, 8 and 15")
// and numbers that name what they count before a multiplication or division
// ("4 nights * 120 euros" is 480), and answers which of two is bigger or
// smaller ("what's bigger, 2^10 or 1000?"); asked to double, halve or triple its
// result ("compute 7 * 8 and halve it") it does, and asked to round ("… and
// round it", "round 3.14159 to 2 decimals") it gives the rounded answer
// last. A number next
// to an operator that no expression takes fails the task ("3 times the
// sum of 2 and 5" is not read as 2 + 5): an answer to another question
// would pass for done. The unit converter knows length (mm to miles, yards), mass (g to
// tonnes), volume (litres,
// millilitres, US cups, gallons), speed (km/h, mph, m/s), temperature and
// time; it converts lists ("5 km and 3 km to
// miles", "10 kg to pounds and ounces"), fails a task that leaves a
// quantity of the kind it converts unconverted or a calculation undone ("a
// report of 12 * 3 and 100 fahrenheit in celsius"), reads a question ("how
// many miles is 42 km", "how many seconds are in 3 hours"), adds and
// subtracts quantities ("5 km plus 3
// miles in km", "5 feet 10 inches to cm", "2 hours and 30 minutes to
// minutes"; temperatures are not added) and
// refuses a temperature below absolute zero. In both, a task that works on
// an earlier task's answer ("… then divide it by 2", "… then convert it
// from km to miles") takes the answer of the last earlier task that
// completed with one (the number after its last "=", unrounded when it was
// a conversion: "6.21 miles" is 6.21371192237 miles) for "it", "that" or
// "the result" (or for the operand an operation leaves out: "… and
// subtract 10"), and says so in its result; a conversion that names only
// the unit to convert to ("… and then to kelvin") converts that answer from
// its own unit, and a quantity added to it or taken from it ("… and add
// 2 km", "… then subtract 3 pounds") is added in that unit, by either.
// Numbers are read as people write them: "3,200" and "1,234.5" group
// thousands, "2,5" has a decimal comma, "1e3" is 1000, and a form that is
// neither ("1.234,5") is refused rather than guessed; numbers said in words
// ("twenty plus five") or with a scale word ("1.5 million") are read too. The converter gives
// 2 decimals, or as many as the task asks for ("… and round to 1
// decimal").
//
// The text analyst counts words, sentences, lines and characters and names
// the most frequent words, of each text the task quotes (in double,
// typographic or single quotes) or the word it names ("the word banana")
// when it names no file. It and the file reader answer every file the
// task names (or, when it names none, the first file earlier results name),
// and refuse a path outside their sandbox folder; a bare name that is not
// at the sandbox's top is the one file of that name in its folders
// ("todo.md" for notes/todo.md), and refused with the candidates when
// several have it. A task that names no file but a word that is the name of
// one file at the sandbox's top without its extension ("open the todo
// list", "how many lines are in the data?") is about that file; the file
// reader lists the folder a task names ("list the files in notes"), or the
// sandbox's top, with a "/" after each folder's name. The report writer refuses a task
// that does not ask for a report ("write a haiku about it"): a table of
// results would pass for done.
package builtin
