import Foundation
import IMCore
import Logging

/// Requests: serials, the pending table (written, waiting for a link, timed out), replies resolved.
extension IMClient {
    func nextDedupeToken() -> String {
        dedupeCounter += 1
        return "\(dedupePrefix)-\(dedupeCounter)"
    }

    func allocateSerial() -> Int {
        defer { nextSerial += 1 }
        return nextSerial
    }

    /// Sends a request and returns its reply. While the client is paused the request waits for the
    /// reconnect (at most `sendTimeout`); a reply carrying an error code is thrown as `IMError`.
    func request(_ command: consuming Command, policy: LossPolicy = .fail) async throws(IMError) -> Command {
        let (serial, slot) = try enqueue(consume command, policy: policy)
        let result = await withTaskCancellationHandler {
            await slot.value()
        } onCancel: {
            Task { await self.resolve(serial, .failure(IMError(.cancelled, "the request was cancelled"))) }
        }
        let reply = try result.get()
        if let error = IMError(reply: reply) { throw error }
        return reply
    }

    /// Writes a request now, so requests leave in the order they are enqueued (or queues it while paused),
    /// and returns the slot its reply will arrive in. `consuming`: the serial is set in the caller's command
    /// itself; a borrowed one would still be the caller's too, and setting it would copy the command's storage.
    func enqueue(_ command: consuming Command, policy: LossPolicy) throws(IMError) -> (serial: Int, slot: ReplySlot) {
        switch connectionState {
        case .opened, .opening, .paused, .resuming: break
        case .closed, .kicked: throw IMError(.clientNotOpen, "open the client first")
        }
        let serial = allocateSerial()
        command.i = serial
        let slot = ReplySlot()
        pending[serial] = PendingRequest(command: command, policy: policy, slot: slot)
        if let link, connectionState == .opened {
            write(serial, on: link)
        } else {
            arm(serial, after: options.sendTimeout, IMError(.sendTimeout, "not sent: the client stayed disconnected"))
        }
        return (serial, slot)
    }

    /// Sends a command without waiting for anything; it is lost when the client is not connected.
    func post(_ command: Command) throws(IMError) {
        guard let link, connectionState == .opened else { throw IMError(.clientNotOpen, "not connected") }
        try link.send(command)
    }

    func write(_ serial: Int, on link: Link) {
        guard let request = pending[serial] else { return }
        request.written = true
        do throws(IMError) {
            try link.send(request.command)
        } catch {
            return resolve(serial, .failure(error))
        }
        arm(serial, after: options.requestTimeout, noReply)
    }

    /// Writes every waiting request, oldest first.
    func flushPending() {
        guard let link else { return }
        for serial in pending.keys.sorted() where pending[serial]?.written == false {
            write(serial, on: link)
        }
    }

    func arm(_ serial: Int, after delay: Duration, _ error: IMError) {
        guard let request = pending[serial] else { return }
        let deadline = ContinuousClock.now.advanced(by: delay)
        request.deadline = deadline
        request.expiry = error
        // The sweeper wakes in time for this one too (with one timeout for every request, the usual case).
        if sweeper != nil, let sweepAt, sweepAt <= deadline { return }
        sweeper?.cancel()
        sweepAt = deadline
        sweeper = Task { [weak self] in
            var wake = deadline
            while true {
                try? await Task.sleep(until: wake, clock: .continuous)
                guard !Task.isCancelled, let self, let next = await self.sweepExpired() else { return }
                wake = next
            }
        }
    }

    /// Fails the requests whose deadline has passed and returns the earliest deadline left: nil (and the
    /// sweeper ends) once none is pending, or when the calling sweeper was replaced by one that wakes earlier.
    func sweepExpired() -> ContinuousClock.Instant? {
        guard !Task.isCancelled else { return nil }
        sweeps += 1
        let now = ContinuousClock.now
        var earliest: ContinuousClock.Instant?
        for (serial, request) in pending {
            guard let deadline = request.deadline, let expiry = request.expiry else { continue }
            if deadline <= now {
                resolve(serial, .failure(expiry))
            } else if earliest.map({ deadline < $0 }) ?? true {
                earliest = deadline
            }
        }
        sweepAt = earliest
        if earliest == nil { sweeper = nil }
        return earliest
    }

    func resolve(_ serial: Int, _ result: Result<Command, IMError>) {
        guard let request = pending.removeValue(forKey: serial) else { return }
        if request.command.cmd == .direct, request.command.transient != true, request.command.action == nil,
            case .success(let ack) = result, ack.code == nil, let id = ack.uid, let timestamp = ack.t,
            let cid = request.command.cid
        {
            noteLastMessage(cid: cid, id: id, timestamp: timestamp)
        }
        request.slot.fulfill(result)
    }

    func failAll(_ error: IMError) {
        for serial in pending.keys.sorted() { resolve(serial, .failure(error)) }
    }
}
