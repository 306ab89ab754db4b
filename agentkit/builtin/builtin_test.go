package builtin_test

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/builtin"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/internal/fuzzworker"
)

func run(t *testing.T, name, desc string, o builtin.Options, earlier ...agentkit.TaskOutcome) (string, error) {
	t.Helper()
	w, err := builtin.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.Run(t.Context(), agentkit.Task{Task: protocol.Task{TaskDesc: desc}, Goal: "the goal", Earlier: earlier})
	return res.Conclusion, err
}

// An empty sandbox is said to be empty, not listed as "files: ".
func TestFileReaderEmptySandbox(t *testing.T) {
	box := t.TempDir()
	got, err := run(t, "files", "List the files", builtin.Options{Sandbox: box})
	if err != nil || got != "the sandbox folder "+box+" has no files" {
		t.Fatalf("list of an empty sandbox = %q, %v", got, err)
	}
}

func TestWorkers(t *testing.T) {
	box := sandboxWith(t, fstest.MapFS{
		"notes.txt": {Data: []byte("Agents team up. Agents conclude! Teams teams.")},
		"data.csv":  {Data: []byte("one,two\n1,2\n3,4\n")},
		"sub/b.md":  {Data: []byte("deep file")},
	})
	o := builtin.Options{Sandbox: box}
	for _, tc := range []struct {
		worker, desc, want, wantErr string
	}{
		{"calculator", "Compute 19.5 * 4", "19.5 * 4 = 78", ""},
		{"calculator", "what is (2 + 3) x 4 - 1?", "(2 + 3) x 4 - 1 = 19", ""},
		{"calculator", "compute 2^10", "2^10 = 1024", ""},
		{"calculator", "compute 50 + 10%", "50 + 10% = 55", ""},
		{"calculator", "compute 200 - 25% - 10", "200 - 25% - 10 = 140", ""},
		{"calculator", "Add 15% VAT to 200", "200 + 15% = 230", ""},
		{"calculator", "subtract 20 percent from 50", "50 - 20% = 40", ""},
		{"calculator", "What is 20% off 80?", "80 - 20% = 64", ""},
		{"calculator", "add 5 to 10", "5 + 10 = 15", ""},
		{"calculator", "15% of 200", "15% of 200 = 30", ""},
		{"calculator", "divide 1 / 0", "", "not a finite number"},
		// A comma before three digits groups thousands; before other
		// digits it is a decimal comma; anything else is refused.
		{"calculator", "Compute 1,234 + 5", "1,234 + 5 = 1239", ""},
		{"calculator", "Compute 17% of 3,200", "17% of 3,200 = 544", ""},
		{"calculator", "what is 1,000,000 / 8", "1,000,000 / 8 = 125000", ""},
		{"calculator", "compute 1,234.5 * 2", "1,234.5 * 2 = 2469", ""},
		{"calculator", "compute 2,5 * 2", "2,5 * 2 = 5", ""},
		{"calculator", "compute 1.234,5 * 2", "", "cannot read the number \"1.234,5\""},
		{"calculator", "compute 1,2,3 + 1", "", "cannot read the number"},
		// Arithmetic in words is computed as the expression it means.
		{"calculator", "Divide 100 by 8", "100 / 8 = 12.5", ""},
		{"calculator", "Add 12 and 30", "12 + 30 = 42", ""},
		{"calculator", "subtract 7 from 50", "50 - 7 = 43", ""},
		{"calculator", "multiply 6 by 7, then 3 times 4", "6 * 7 = 42; 3 * 4 = 12", ""},
		{"calculator", "What is 9 minus -3 and 2 plus 2?", "9 - -3 = 12; 2 + 2 = 4", ""},
		{"calculator", "What is the square root of 144?", "√144 = 12", ""},
		{"calculator", "What's the average of 3, 5 and 10?", "(3 + 5 + 10) / 3 = 6", ""},
		{"calculator", "the mean of 1,5, 2,5 and 3,200", "(1,5 + 2,5 + 3,200) / 3 = 1068", ""},
		{"calculator", "Sum of 1, 2, 3 and 4", "1 + 2 + 3 + 4 = 10", ""},
		{"calculator", "Sum 4, 8, 15, 16, 23 and 42", "4 + 8 + 15 + 16 + 23 + 42 = 108", ""},
		{"calculator", "What is the remainder of 17 divided by 5?", "17 mod 5 = 2", ""},
		{"calculator", "compute 100 modulo 7 + 1", "100 mod 7 + 1 = 3", ""},
		{"calculator", "what is 7 mod 0", "", "not a finite number"},
		{"calculator", "Split a 90 euro bill between 4 people", "90 / 4 = 22.5", ""},
		{"calculator", "Split a bill of 120 euros between 4 people", "120 / 4 = 30", ""},
		{"calculator", "split the restaurant bill of 75 among 3 of us", "75 / 3 = 25", ""},
		{"calculator", "What's 3 cubed?", "3^3 = 27", ""},
		{"calculator", "halve 56", "56 / 2 = 28", ""},
		{"calculator", "Compute 100 / 7 to 3 decimal places", "100 / 7 = 14.2857142857, rounded = 14.286", ""},
		{"calculator", "Compute 2 ** 8", "2^8 = 256", ""},
		{"calculator", "what is twenty plus five", "20 + 5 = 25", ""},
		{"calculator", "Compute 50 euros minus 20%", "50 - 20% = 40", ""},
		{"calculator", "What is 10 percent more than 50?", "50 + 10% = 55", ""},
		{"calculator", "Increase 80 by 25%", "80 + 25% = 100", ""},
		{"calculator", "Decrease 200 by 15 percent", "200 - 15% = 170", ""},
		{"calculator", "What percentage of 80 is 20?", "20 / 80 * 100 = 25", ""},
		{"calculator", "What is 3 to the power 4?", "3^4 = 81", ""},
		{"calculator", "What's 5 plus 5 plus 5 minus 1?", "5 + 5 + 5 - 1 = 14", ""},
		{"calculator", "What is 7% of 1.5 million?", "7% of 1500000 = 105000", ""},
		{"calculator", "What is one third of ninety?", "90 / 3 = 30", ""},
		{"calculator", "How many eggs are 3 boxes of 12 eggs?", "3 boxes * 12 = 36", ""},
		{"calculator", "I have 3 boxes of 12 eggs. How many eggs in total", "3 boxes * 12 = 36", ""},
		{"calculator", "Calculate the area of a rectangle 5 by 8", "5 * 8 = 40", ""},
		{"calculator", "What is the area of a 4 m by 5.5 m room?", "4 * 5.5 = 22", ""},
		{"calculator", "Reduce 100 by 20", "", "no arithmetic expression"},
		{"calculator", "Tile a 3 by 4 floor", "3 * 4 = 12", ""},
		{"calculator", "Paint a 2.5 m by 4 m wall", "2.5 * 4 = 10", ""},
		{"calculator", "Average of 4, 8 and 12", "(4 + 8 + 12) / 3 = 8", ""},
		{"calculator", "What is 12 plus 30, divided by 6?", "(12 + 30) / 6 = 7", ""},
		{"calculator", "what is 10 minus 4, times 3", "(10 - 4) * 3 = 18", ""},
		{"calculator", "what is 10 minus 4 times 3", "10 - 4 * 3 = -2", ""},
		{"calculator", "What's bigger, 2^10 or 1000?", "2^10 = 1024 is bigger than 1000", ""},
		{"calculator", "which is smaller: 3 * 7 or 20", "20 is smaller than 3 * 7 = 21", ""},
		{"calculator", "which is greater, 4 or 2 + 2", "4 and 2 + 2 = 4 are equal", ""},
		{"calculator", "What is 15% tip on a 60 dollar meal?", "15% tip on a 60 = 9", ""},
		{"calculator", "What is 8% sales tax on 250?", "8% sales tax on 250 = 20", ""},
		{"calculator", "Convert 100 euros to dollars", "", "asks for a conversion: the calculator converts no units or currencies"},
		{"calculator", "Compute 7 * 8 and halve it", "7 * 8 = 56, halved = 28", ""},
		{"calculator", "compute 10 / 4, double it and round it", "10 / 4 = 2.5, doubled = 5", ""},
		{"calculator", "compute 10 / 3, triple the result and round to 1 decimal", "10 / 3 = 3.33333333333, tripled = 10", ""},
		{"calculator", "compute 2 + 2 and 3 * 3 and double it", "", "cannot tell which result to double"},
		{"calculator", "compute 4 nights * 120 euros", "4 nights * 120 = 480", ""},
		{"calculator", "3 boxes x 12 eggs / 4 people", "3 boxes x 12 eggs / 4 = 9", ""},
		{"calculator", "compute 3 max 5", "", "no arithmetic expression"},
		{"calculator", "What is 12 % of 50?", "12 % of 50 = 6", ""},
		{"calculator", "Compute 7 / 2 and round it", "7 / 2 = 3.5, rounded = 4", ""},
		{"calculator", "Round 3.14159 to 2 decimals", "3.14159 rounded = 3.14", ""},
		{"calculator", "compute 10 / 3, rounded to 3 decimal places", "10 / 3 = 3.33333333333, rounded = 3.333", ""},
		{"calculator", "compute 6 * 7 and round it", "6 * 7 = 42", ""},
		{"calculator", "round -2,5", "-2,5 rounded = -3", ""},
		{"calculator", "What is 2 to the 10th power?", "2^10 = 1024", ""},
		{"calculator", "Compute 15% tip on 84.50", "15% tip on 84.50 = 12.675", ""},
		{"calculator", "a 20% discount on 50", "20% discount on 50 = 10", ""},
		{"calculator", "Compute 3 * 4 and -5 + 6", "3 * 4 = 12; -5 + 6 = 1", ""},
		{"calculator", "what is 300 euros divided by 4", "300 euros / 4 = 75", ""},
		{"calculator", "the product of 2, 3, and 4", "2 * 3 * 4 = 24", ""},
		{"calculator", "the total of 19.5 and -4", "19.5 + -4 = 15.5", ""},
		{"calculator", "compute sqrt(2,25) + 1", "√2,25 + 1 = 2.5", ""},
		{"calculator", "what is 12 squared and 2 to the power of 10", "12^2 = 144; 2^10 = 1024", ""},
		{"calculator", "the square root of -4", "", "no real square root of -4"},
		{"calculator", "What is 20 percent of 55 plus 3?", "20% of 55 + 3 = 14", ""},
		{"calculator", "What is 15 per cent of 240?", "15% of 240 = 36", ""},
		{"calculator", "Add 17, 25 and 38", "17 + 25 + 38 = 80", ""},
		{"calculator", "What is 7 factorial?", "7! = 5040", ""},
		{"calculator", "Multiply 3 by 4 by 5", "3 * 4 * 5 = 60", ""},
		{"calculator", "Compute 1e3 + 1 and 2.5E-2 * 4", "1000 + 1 = 1001; 0.025 * 4 = 0.1", ""},
		{"calculator", "What is 1/3 of 90?", "1/3 * 90 = 30", ""},
		{"calculator", "What is half of 90 and a quarter of 20?", "90 / 2 = 45; 20 / 4 = 5", ""},
		{"calculator", "double 21, then triple 5", "2 * 21 = 42; 3 * 5 = 15", ""},
		{"calculator", "3 nights at 90 euros", "3 nights * 90 = 270", ""},
		// A number no expression takes is a question read wrong: refused.
		{"calculator", "What is 3 times the sum of 2 and 5?", "", `read "2 + 5" and did not use 3`},
		{"calculator", "Compute 19.5 * 4 and divide by 3", "", `read "19.5 * 4" and did not use 3`},
		{"calculator", "For 3 people in 2026, compute 19.5 * 4", "19.5 * 4 = 78", ""},
		{"calculator", "For the 3-day trip compute 19.5 * 4", "19.5 * 4 = 78", ""},
		{"calculator", "Compute 19.5 * 4 and 10 - 3", "19.5 * 4 = 78; 10 - 3 = 7", ""},
		{"calculator", "Compute 10 / 4 for t1, rounded to 1 decimal, using notes2.txt", "10 / 4 = 2.5", ""},
		{"calculator", "the factorial of 5", "5! = 120", ""},
		{"calculator", "compute 2.5! + 1", "", "only whole numbers up to 170"},
		{"calculator", "compute 3! + 1", "3! + 1 = 7", ""},
		{"calculator", "what is 2.5!", "", "no arithmetic expression"},
		{"calculator", "compute 171!", "", "only whole numbers up to 170"},
		{"calculator", "Compute 10% of 50% of 200", "10% of 50% of 200 = 10", ""},
		{"calculator", "compute 100 / 3 and 0.1 + 0.2", "100 / 3 = 33.3333333333; 0.1 + 0.2 = 0.3", ""},
		{"calculator", "what is 15% of 200 + 3", "15% of 200 + 3 = 33", ""},
		{"calculator", "add 2 + 10% of 50", "2 + 10% of 50 = 7", ""},
		{"calculator", "no numbers here", "", `no arithmetic expression found in "no numbers here" (it computes expressions like "19.5 * 4"`},
		// Every expression of the task is answered, each once; earlier
		// results (after a blank line) are not this task's.
		{"calculator", "Compute 2 + 2 and 3 * 3, then 2 + 2 again", "2 + 2 = 4; 3 * 3 = 9", ""},
		{"calculator", "add 1 + 1\n\nResults so far:\n- Compute 19.5 * 4: 19.5 * 4 = 78", "1 + 1 = 2", ""},
		{"calculator", "compute 2 + 2 and 1 / 0", "", "1 / 0: the result is not a finite number"},
		{"units", "Convert 42 km to miles", "42 km = 26.10 miles", ""},
		{"units", "convert 20 kg to pounds", "20 kg = 44.09 lb", ""},
		{"units", "100 fahrenheit in celsius please", "100 °F = 37.78 °C", ""},
		{"units", "Convert 500 ml to cups", "500 ml = 2.11 cups", ""},
		{"units", "Convert 100 yards to meters", "100 yd = 91.44 m", ""},
		{"units", "How many mm in 2.5 cm?", "2.5 cm = 25.00 mm", ""},
		{"units", "Convert 2 tonnes to pounds", "2 tonnes = 4409.25 lb", ""},
		{"units", "Convert to miles: 42 km", "42 km = 26.10 miles", ""},
		{"units", "Convert five km to miles", "5 km = 3.11 miles", ""},
		{"units", "Convert 2 hours and 30 minutes to minutes", "2 hours + 30 minutes = 150.00 minutes", ""},
		{"units", "Convert 1 pound and 4 ounces to grams", "1 lb + 4 oz = 566.99 g", ""},
		{"units", "Convert 5 km and 3 km to miles", "5 km = 3.11 miles; 3 km = 1.86 miles", ""},
		{"units", "How many hours are in a week?", "1 week = 168.00 hours", ""},
		{"units", "how many seconds in an hour", "1 hour = 3600.00 seconds", ""},
		{"units", "add 1 mile to it", "", `no conversion like "5 km to miles" found in "add 1 mile to it"`},
		{"units", "Convert 5 parsecs to km", "", `the unit converter does not know the unit "parsecs"; it converts length (cm, ft, in, km, m, miles, mm, yd)`},
		{"units", "What is 45 minutes in hours plus 2 hours?", "45 minutes + 2 hours = 2.75 hours", ""},
		{"units", "What is 10 km/h in m/s?", "10 km/h = 2.78 m/s", ""},
		{"units", "5 kg to miles", "", "cannot convert"},
		{"units", "convert 2,500 meters to miles", "2,500 m = 1.55 miles", ""},
		{"units", "convert -1,500 meters to km", "-1,500 m = -1.50 km", ""},
		{"units", "convert 1,5 kg to pounds", "1,5 kg = 3.31 lb", ""},
		{"units", "How many miles is 42 km?", "42 km = 26.10 miles", ""},
		{"units", "how many pounds are 2,000 grams", "2,000 g = 4.41 lb", ""},
		{"units", "Convert 0 kelvin to celsius", "0 K = -273.15 °C", ""},
		{"units", "convert 100 celsius to kelvin", "100 °C = 373.15 K", ""},
		{"units", "convert -300 celsius to fahrenheit", "", "-300 °C is below absolute zero"},
		{"units", "nothing", "", "no conversion"},
		{"units", "convert 5 km to miles and 20 kg to pounds", "5 km = 3.11 miles; 20 kg = 44.09 lb", ""},
		{"units", "convert 5 km to miles and 5 kg to miles", "", "cannot convert kg (mass) to miles (length)"},
		{"units", "What is 5 km plus 3 miles in km?", "5 km + 3 miles = 9.83 km", ""},
		{"units", "2 kg + 500 g - 1 lb to pounds", "2 kg + 500 g - 1 lb = 4.51 lb", ""},
		{"units", "10 km minus 2,500 m in miles", "10 km - 2,500 m = 4.66 miles", ""},
		{"units", "convert 5 km plus 3 kg to miles", "", "cannot convert kg (mass) to miles (length)"},
		{"units", "5 apples plus 3 miles in km", "", `"apples" is not a unit it knows`},
		{"units", "Write a short report of 12 * 3 and 100 fahrenheit in celsius", "", `converted "100 fahrenheit in celsius" and does not compute with 12`},
		{"units", "convert 5 km to miles, then multiply by 4", "", `does not compute with 4`},
		{"units", "convert 5 km to miles for the 3 of us", "5 km = 3.11 miles", ""},
		{"units", "20 celsius plus 5 celsius in fahrenheit", "", "cannot add temperatures"},
		{"units", "Convert 1 gallon to liters and 5 feet 10 inches to cm", "1 gallon = 3.79 l; 5 ft + 10 in = 177.80 cm", ""},
		{"units", "Convert 1 mile to meters", "1 mile = 1609.34 m", ""},
		{"units", "Convert 5 km to miles and round to 1 decimal", "5 km = 3.1 miles", ""},
		{"units", "200 km of driving in miles", "200 km = 124.27 miles", ""},
		{"units", "5 kg of of to pounds", "", "no conversion"},
		{"units", "convert 100 fahrenheit to celsius, rounded", "100 °F = 38 °C", ""},
		{"units", "How many seconds are in 3 hours?", "3 hours = 10800.00 seconds", ""},
		{"units", "how many minutes are there in 2 days?", "2 days = 2880.00 minutes", ""},
		{"units", "convert 90 minutes to hours and 2 weeks to days", "90 minutes = 1.50 hours; 2 weeks = 14.00 days", ""},
		{"units", "1 day 12 hours in hours", "1 day + 12 hours = 36.00 hours", ""},
		{"units", "convert 3 hours to km", "", "cannot convert hours (time) to km (length)"},
		{"units", "in 2 days 5 km to miles", "5 km = 3.11 miles", ""},
		{"units", "For a 3 day trip, convert 500 km to miles", "500 km = 310.69 miles", ""},
		{"units", "Convert 5 km and 3 km to miles", "5 km = 3.11 miles; 3 km = 1.86 miles", ""},
		{"units", "convert 1 kg, 2 kg and 500 g in pounds", "1 kg = 2.20 lb; 2 kg = 4.41 lb; 500 g = 1.10 lb", ""},
		{"units", "Convert 10 kg to pounds and ounces", "10 kg = 22.05 lb; 10 kg = 352.74 oz", ""},
		{"units", "Convert 5 km to miles and 20 kg to pounds", "5 km = 3.11 miles; 20 kg = 44.09 lb", ""},
		{"units", "How many pounds is 3 kg and 2 kg?", "", `read "3 kg to pounds" and did not use 2 kg`},
		{"units", "Convert 20 celsius and 30 celsius to fahrenheit", "20 °C = 68.00 °F; 30 °C = 86.00 °F", ""},
		{"units", "what is 1 kg 200 g in pounds", "1 kg + 200 g = 2.65 lb", ""},
		{"textstats", "Count the words in notes.txt", "notes.txt: 7 words, 3 sentences, 1 line, 45 characters; most frequent: agents (2), teams (2), conclude (1)", ""},
		{"textstats", "Count the words: one two three.", "the text: 3 words, 1 sentence, 1 line, 15 characters; most frequent: three (1)", ""},
		{"textstats", "Count the words in ../secret.txt", "", "read ../secret.txt"},
		{"textstats", "How many words in this text: the cat sat on the mat", "the text: 6 words, 1 sentence, 1 line, 23 characters", ""},
		{"textstats", "Count the words in notes.txt and sub/b.md", "notes.txt: 7 words, 3 sentences, 1 line, 45 characters; most frequent: agents (2), teams (2), conclude (1); sub/b.md: 2 words, 1 sentence, 1 line, 9 characters; most frequent: deep (1), file (1)", ""},
		{"textstats", "count the words\n\nResults so far: t1 read notes.txt", "notes.txt: 7 words, 3 sentences, 1 line, 45 characters; most frequent: agents (2), teams (2), conclude (1)", ""},
		{"textstats", "How long is the text 'hello brave new world' in characters?", `"hello brave new world": 4 words, 1 sentence, 1 line, 21 characters; most frequent: brave (1), hello (1), world (1)`, ""},
		{"textstats", "What's the length of 'abc de'? Don't guess", `"abc de": 2 words, 1 sentence, 1 line, 6 characters`, ""},
		{"textstats", "Count the letters in the word banana", `"banana": 1 word, 1 sentence, 1 line, 6 characters; most frequent: banana (1)`, ""},
		{"textstats", "Which word appears most in notes.txt?", "notes.txt: 7 words, 3 sentences, 1 line, 45 characters; most frequent: agents (2), teams (2), conclude (1)", ""},
		{"textstats", `How many characters are in "hello world"?`, `"hello world": 2 words, 1 sentence, 1 line, 11 characters; most frequent: hello (1), world (1)`, ""},
		{"textstats", `Count the words of “one two” and "three four five"`, `"one two": 2 words, 1 sentence, 1 line, 7 characters; "three four five": 3 words, 1 sentence, 1 line, 15 characters; most frequent: five (1), four (1), three (1)`, ""},
		{"textstats", "Translate this sentence into French", "", "does not ask for text statistics"},
		{"textstats", "Text statistics of notes.txt", "notes.txt: 7 words, 3 sentences, 1 line, 45 characters; most frequent: agents (2), teams (2), conclude (1)", ""},
		{"textstats", "How many lines are in data.csv?", "data.csv: 6 words, 1 sentence, 3 lines, 16 characters", ""},
		{"files", "Read /etc/passwd", "", "read /etc/passwd: only files inside the sandbox folder"},
		{"files", "Read notes.txt and sub/b.md", "notes.txt:\nAgents team up. Agents conclude! Teams teams.\n\nsub/b.md:\ndeep file", ""},
		{"files", "Read notes.txt", "notes.txt:\nAgents team up. Agents conclude! Teams teams.", ""},
		{"files", "Read missing.txt", "", "read missing.txt: there is no such file in the sandbox folder " + box},
		{"files", "List the files", "files: data.csv, notes.txt, sub/", ""},
		{"files", "List the files in sub", "files in sub/: b.md", ""},
		{"files", "What is in the sub folder?", "files in sub/: b.md", ""},
		{"files", "Open the notes", "notes.txt:\nAgents team up. Agents conclude! Teams teams.", ""},
		{"files", "List the notes", "files: data.csv, notes.txt, sub/", ""},
		{"textstats", "How many lines are in the data?", "data.csv: 6 words, 1 sentence, 3 lines, 16 characters", ""},
		{"textstats", "Count the words in: my notes are short", "the text: 4 words, 1 sentence, 1 line, 19 characters; most frequent: notes (1), short (1)", ""},
		{"textstats", "Count the words in 'the notes'", `"the notes": 2 words, 1 sentence, 1 line, 9 characters; most frequent: notes (1)`, ""},
		{"report", "Write the report", "", "no earlier results"},
	} {
		got, err := run(t, tc.worker, tc.desc, o)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s(%q): err = %v, want %q", tc.worker, tc.desc, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s(%q) = %q, %v; want %q", tc.worker, tc.desc, got, err, tc.want)
		}
	}
	haiku := agentkit.TaskOutcome{TaskID: "t1", Assignee: "calc", TaskAbstract: "Compute", Status: "completed", Result: "4 = 4"}
	if _, err := run(t, "report", "write a haiku about it", o, haiku); err == nil || !strings.Contains(err.Error(), "does not ask for a report") {
		t.Errorf("a haiku asked of the report writer: err = %v, want does not ask for a report", err)
	}
	got, err := run(t, "report", "write it up as a summary", o,
		agentkit.TaskOutcome{TaskID: "t1", Assignee: "calc", TaskAbstract: "Compute", Status: "completed", Result: "4 = 4"},
		agentkit.TaskOutcome{TaskID: "t2", Assignee: "units", TaskAbstract: "Convert | units", Status: "failed", Result: "oops"})
	want := "# Report\n\nGoal: the goal\n\n| Task | By | Result |\n|---|---|---|\n| Compute | calc | 4 = 4 |\n| Convert / units | units | **failed**: oops |\n"
	if err != nil || got != want {
		t.Fatalf("report = %q, %v\nwant %q", got, err, want)
	}
	// A task that works on an earlier one's answer ("then divide it by
	// 2") takes the last completed task's answer.
	earlier := []agentkit.TaskOutcome{
		{TaskID: "t1", Status: "completed", Result: "10 miles = 16.09 km"},
		{TaskID: "t2", Status: "failed", Result: "x = 5"},
	}
	for desc, want := range map[string]string{
		"divide it by 2\n\nResults so far:\n- t1: 10 miles = 16.09 km": "16.09344 / 2 = 8.04672 (16.09344: the result of t1)",
		"add 4 to the result":   "4 + 16.09344 = 20.09344 (16.09344: the result of t1)",
		"what is 10% of that?":  "10% of 16.09344 = 1.609344 (16.09344: the result of t1)",
		"compute 2 * 3":         "2 * 3 = 6",
		"subtract 10":           "16.09344 - 10 = 6.09344 (16.09344: the result of t1)",
		"and then add 4":        "4 + 16.09344 = 20.09344 (16.09344: the result of t1)",
		"divide by 2":           "16.09344 / 2 = 8.04672 (16.09344: the result of t1)",
		"multiply by 3.":        "16.09344 * 3 = 48.28032 (16.09344: the result of t1)",
		"then subtract 10%":     "16.09344 - 10% = 14.484096 (16.09344: the result of t1)",
		"add 5 percent":         "16.09344 + 5% = 16.898112 (16.09344: the result of t1)",
		"round it":              "16.09344 rounded = 16 (16.09344: the result of t1)",
		"round it to 1 decimal": "16.09344 rounded = 16.1 (16.09344: the result of t1)",
		"double it":             "2 * 16.09344 = 32.18688 (16.09344: the result of t1)",
		"halve it":              "16.09344 / 2 = 8.04672 (16.09344: the result of t1)",
	} {
		if got, err := run(t, "calculator", desc, o, earlier...); err != nil || got != want {
			t.Errorf("calculator(%q) after t1 = %q, %v; want %q", desc, got, err, want)
		}
	}
	// unitsAfter runs the converter on each task after the earlier result
	// and checks its answer ("": it must fail).
	unitsAfter := func(earlier string, cases map[string]string) {
		t.Helper()
		e := agentkit.TaskOutcome{TaskID: "t1", Status: "completed", Result: earlier}
		for desc, want := range cases {
			got, err := run(t, "units", desc, o, e)
			if want == "" && err == nil || want != "" && (err != nil || got != want) {
				t.Errorf("units(%q) after %q = %q, %v; want %q", desc, earlier, got, err, want)
			}
		}
	}
	// A quantity added to the earlier answer, or taken from it, in its unit.
	unitsAfter("3 miles = 4.83 km", map[string]string{
		"add 2 km":                   "4.828032 km + 2 km = 6.83 km (4.828032: the result of t1)",
		"and then subtract 500 m.":   "4.828032 km - 500 m = 4.33 km (4.828032: the result of t1)",
		"add 1 mile to it":           "4.828032 km + 1 mile = 6.44 km (4.828032: the result of t1)",
		"add 2 kg":                   "",
		"add 2 km and convert to ft": "",
	})
	// The calculator adds them as the converter does.
	lb := agentkit.TaskOutcome{TaskID: "t1", Status: "completed", Result: "10 kg = 22.05 lb"}
	if got, err := run(t, "calculator", "then subtract 3 pounds", o, lb); err != nil || got != "22.0462262185 lb - 3 lb = 19.05 lb (22.0462262185: the result of t1)" {
		t.Errorf("calculator: 10 kg in pounds less 3 pounds = %q, %v", got, err)
	}
	// An earlier result that is no one answer is named, not taken for none.
	counts := agentkit.TaskOutcome{TaskID: "t1", Status: "completed", Result: "todo.txt: 7 words, 3 lines"}
	if _, err := run(t, "calculator", "double it", o, counts); err == nil ||
		!strings.Contains(err.Error(), `"double it" works on an earlier result, and none is one answer (a number after "=") to take: t1 gave "todo.txt: 7 words, 3 lines"`) {
		t.Errorf("calculator: double a count of words and lines: %v", err)
	}
	calc := []agentkit.TaskOutcome{{TaskID: "t1", Status: "completed", Result: "12 * 12 = 144"}}
	if got, err := run(t, "units", "convert it from km to miles", o, calc...); err != nil || got != "144 km = 89.48 miles (144: the result of t1)" {
		t.Errorf("units after t1 = %q, %v", got, err)
	}
	// "That many" and "that much" name it too, before its unit or alone.
	for desc, want := range map[string]string{
		"convert that many km to miles": "144 km = 89.48 miles (144: the result of t1)",
		"then that much kg in pounds":   "144 kg = 317.47 lb (144: the result of t1)",
	} {
		if got, err := run(t, "units", desc, o, calc...); err != nil || got != want {
			t.Errorf("units: %q after t1 = %q, %v; want %q", desc, got, err, want)
		}
	}
	if got, err := run(t, "calculator", "add 6 to that many", o, calc...); err != nil || got != "6 + 144 = 150 (144: the result of t1)" {
		t.Errorf("calculator: add 6 to that many after t1 = %q, %v", got, err)
	}
	// A conversion that names only the unit to convert to takes the earlier
	// answer's own unit.
	unitsAfter("100 °F = 37.78 °C", map[string]string{
		"to kelvin":                "37.7777777778 °C = 310.93 K (37.7777777778: the result of t1)",
		"and then to fahrenheit":   "37.7777777778 °C = 100.00 °F (37.7777777778: the result of t1)",
		"convert it into kelvin.":  "37.7777777778 °C = 310.93 K (37.7777777778: the result of t1)",
		"convert it from C to K":   "37.7777777778 °C = 310.93 K (37.7777777778: the result of t1)",
		"convert 5 km to miles":    "5 km = 3.11 miles",
		"then to miles per hour":   "",
		"to kelvin, then to miles": "",
	})
	// A conversion chained on an earlier one starts from its value
	// unrounded: "6.21 miles" as printed gave 32788.80 ft for 10 km.
	miles := agentkit.TaskOutcome{TaskID: "t1", Assignee: "units", Status: "completed", Result: "10 km = 6.21 miles"}
	if got, err := run(t, "units", "then convert it to feet", o, miles); err != nil || got != "6.21371192237 miles = 32808.40 ft (6.21371192237: the result of t1)" {
		t.Errorf("feet of 10 km by way of miles: %q, %v", got, err)
	}
	// A result that only looks like a conversion keeps its number.
	odd := agentkit.TaskOutcome{TaskID: "t1", Assignee: "x", Status: "completed", Result: "about 10 km = 7 miles"}
	if got, err := run(t, "calculator", "divide it by 7", o, odd); err != nil || got != "7 / 7 = 1 (7: the result of t1)" {
		t.Errorf("after a result that is no conversion: %q, %v", got, err)
	}
	if _, err := run(t, "calculator", "divide it by 2", o, earlier[1:]...); err == nil || !strings.Contains(err.Error(), "no arithmetic expression") {
		t.Errorf("after a failed task only: err = %v, want no arithmetic expression", err)
	}
	if _, err := builtin.New("nope", o); err == nil {
		t.Fatal("unknown worker accepted")
	}
}

// FuzzWorkers runs the calculator and the unit converter, the two workers
// that parse numbers out of free text, on any input: an error is fine, a
// panic is not.
func FuzzWorkers(f *testing.F) {
	fuzzworker.Capture(f)
	for _, s := range []string{"1+2", "((((1))))", "2^2^2^2", "-(-(-3))", "1/0", "9999999999999999999*9", "1,234.5 + 2,5", "1,2,3.4,5 * 1", "√√(√16)", "square root of 2 squared", "divide 1 by 0",
		"the average of 3, 5 and 10", "5 km plus 3 miles in km", "- 5 km minus -3 ft to m", "minus 3 celsius plus 2 f in k", "how many miles is 42 km"} {
		f.Add(s)
	}
	var ws []agentkit.Worker
	for _, name := range []string{"calculator", "units"} {
		w, err := builtin.New(name, builtin.Options{})
		if err != nil {
			f.Fatal(err)
		}
		ws = append(ws, w)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, w := range ws {
			_, _ = w.Run(t.Context(), agentkit.Task{Task: protocol.Task{TaskDesc: s}})
		}
	})
}

// "X more than A or B" compares X with A or B, not A with B.
func TestCompareNeedsTwoSides(t *testing.T) {
	if got, _ := run(t, "calculator", "Is 50% of 10 more than 4 or 6?", builtin.Options{}); strings.Contains(got, "is more than") {
		t.Errorf("read as a comparison of 4 and 6: %q", got)
	}
}

// A bare file name that is not at the sandbox's top is found in its folders
// when one file has it, and refused, with the candidates, when several do.
func TestFilesFoundInFolders(t *testing.T) {
	box := sandboxWith(t, fstest.MapFS{
		"notes/todo.md": {Data: []byte("buy milk")},
		"a/x.txt":       {Data: []byte("one")},
		"b/x.txt":       {Data: []byte("two")},
	})
	o := builtin.Options{Sandbox: box}
	if got, err := run(t, "textstats", "Count the words in todo.md", o); err != nil || !strings.HasPrefix(got, "notes/todo.md: 2 words") {
		t.Errorf("todo.md = %q, %v; want notes/todo.md counted", got, err)
	}
	if got, err := run(t, "files", "Read todo.md", o); err != nil || got != "notes/todo.md:\nbuy milk" {
		t.Errorf("read todo.md = %q, %v", got, err)
	}
	if _, err := run(t, "files", "Read x.txt", o); err == nil || !strings.Contains(err.Error(), "2 files in the sandbox folder") || !strings.Contains(err.Error(), "a/x.txt, b/x.txt") {
		t.Errorf("read x.txt = %v; want it refused as ambiguous", err)
	}
	if _, err := run(t, "files", "Read y.txt", o); err == nil || !strings.Contains(err.Error(), "there is no such file") {
		t.Errorf("read y.txt = %v; want no such file", err)
	}
}

// sandboxWith is a sandbox folder holding files.
func sandboxWith(t *testing.T, files fstest.MapFS) string {
	t.Helper()
	box := t.TempDir()
	if err := os.CopyFS(box, files); err != nil {
		t.Fatal(err)
	}
	return box
}
