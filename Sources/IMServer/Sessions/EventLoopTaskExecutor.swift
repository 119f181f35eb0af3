import NIOCore

/// Runs a task's jobs on a NIO event loop, so that a WebSocket session handles what it received on the event
/// loop that read it (issue 30, run to completion) instead of handing each message to Swift's cooperative pool
/// and its replies back. Written here because NIO 2.101's `EventLoop` is a `SerialExecutor` (for actors) but
/// not a `TaskExecutor` (for `Task(executorPreference:)`). A job enqueued from the loop itself costs no
/// wake-up; one resumed from another thread wakes the loop as it would have woken a pool thread.
final class EventLoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) {
        self.loop = loop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
