package worker

import (
	"os/exec"
	"syscall"
)

// killGroup runs the program in its own process group and makes
// cancellation kill the whole group, so that children it started do not
// outlive the task. On Linux the program is also killed when the agent
// process dies (even by SIGKILL), so no task runs on without its agent.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
