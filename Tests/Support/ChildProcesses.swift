/// The tests start their servers and tools with `ChildProcess` (Sources/ChildProcesses, shared with `hookbot bench`):
/// every test module that imports this support module sees it.
@_exported import ChildProcesses
