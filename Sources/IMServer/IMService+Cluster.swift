import Foundation
import IMCore

/// What a node does with the cluster's announcements (see `ClusterNode`).
extension IMService {
    /// Joins the cluster (when the store is shared): migrates the schema, registers the node and listens.
    func joinCluster() async throws {
        guard let cluster else { return }
        try await cluster.store.migrate()
        try await cluster.start(
            handle: { [weak self] announcement in await self?.handle(announcement) },
            lostAnnouncements: { [weak self] in self?.dropSessionsAfterLostAnnouncements() })
        logger.info("joined the cluster", metadata: ["node": "\(cluster.id)", "channel": "\(cluster.store.channel)"])
    }

    /// Leaves the cluster and closes the store's connections.
    func leaveCluster() async {
        await cluster?.stop()
        await store.shutdown()
    }

    func handle(_ announcement: Announcement) async {
        guard let cluster else { return }
        metrics.announcementReceived(announcement)
        switch announcement {
        case .message(let record, let id, let cid, let members, let room):
            await deliverAnnounced(record, id: id, cid: cid, members: members, room: room)
        case .clients(let clientIDs, let command, let origin):
            guard origin != cluster.id else { return }
            deliverLocally(command, to: clientIDs.flatMap { registry.connections(of: $0) })
        case .room(let cid, let command, let origin):
            guard origin != cluster.id else { return }
            deliverLocally(command, to: rooms.connections(in: cid))
        case .kick(let clientID, let tag, let generation, let keep):
            guard keep.node != cluster.id else { return }
            for connection in registry.connections(of: clientID) {
                guard let identity = connection.identity, identity.tag == tag, identity.tagGeneration < generation else { continue }
                kick(connection, tag: tag)
            }
        case .review(let interceptor, let origin, let request):
            interceptors.forward(request, to: interceptor, from: origin)
        case .verdict(let origin, let answer):
            guard origin == cluster.id else { return }
            interceptors.resolveRelayed(answer)
        }
    }

    /// Delivers a stored message announced by its node to this node's connections of its audience; reads
    /// it (and its members) from the database when the announcement could not carry them.
    private func deliverAnnounced(_ record: MessageRecord?, id: String, cid: String, members: [String]?, room: Bool) async {
        do {
            var record = record
            if record == nil { record = try await store.message(id) }
            guard let record else { return }
            var audience = members ?? []
            if !room, members == nil { audience = try await store.members(of: cid) }
            pipeline.deliver(record, members: audience, room: room)
            metrics.clusterDeliveryLatency.recordMilliseconds(max(0, Identifiers.nowMillis() - record.t))
        } catch {
            logger.error("announced message could not be read", metadata: ["id": "\(id)", "error": "\(error)"])
        }
    }

    /// The node stopped hearing announcements and cannot know what it missed: its clients are told to go
    /// away, so that they reconnect and receive the missed messages as offline messages.
    private func dropSessionsAfterLostAnnouncements() {
        logger.error("cluster announcements were lost; closing sessions so that clients resynchronise")
        goAway()
        for connection in registry.allConnections {
            connectionClosed(connection)
            connection.close(code: .goingAway)
        }
    }
}
