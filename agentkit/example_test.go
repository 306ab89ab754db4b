package agentkit_test

import (
	"fmt"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
)

func ExampleTaskReport() {
	fmt.Println(agentkit.TaskReport([]protocol.TaskState{
		{Task: protocol.Task{TaskID: "t1", TaskAbstract: "weather in Rome"}, Status: protocol.TaskCompleted, Result: "sunny"},
		{Task: protocol.Task{TaskID: "t2"}, Status: protocol.TaskFailed, Result: "no data"},
		{Task: protocol.Task{TaskID: "t3", TaskAbstract: "summary"}, Status: protocol.TaskRunning},
	}))
	// Output:
	// weather in Rome: sunny
	// t2: FAILED: no data
	// summary: not finished (running)
}
