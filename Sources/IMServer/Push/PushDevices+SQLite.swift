import Foundation
import GRDB
import IMCore
import PushProviders

/// `push_devices` in the server's SQLite file (migration `v13-push-devices`).
enum SQLitePushDevices {
    static func create(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE push_devices (
                    provider TEXT NOT NULL,
                    token TEXT NOT NULL,
                    client_id TEXT NOT NULL,
                    device_id TEXT NOT NULL DEFAULT '',
                    keys TEXT,
                    created_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL,
                    PRIMARY KEY (provider, token)
                );
                CREATE INDEX push_devices_by_client ON push_devices(client_id, updated_at);
                """)
    }
}

extension SQLiteStore: PushDeviceStore {
    func registerPushDevice(_ record: PushDeviceRecord, cap: Int) async throws -> PushDeviceRegistration {
        try await db.write { db in
            if !record.deviceID.isEmpty {
                try db.execute(
                    sql: """
                        DELETE FROM push_devices WHERE client_id = ? AND device_id = ? AND provider = ? AND token <> ?
                        """, arguments: [record.clientID, record.deviceID, record.provider, record.token])
            }
            let holder = try String.fetchOne(
                db, sql: "SELECT client_id FROM push_devices WHERE provider = ? AND token = ?", arguments: [record.provider, record.token])
            try db.execute(
                sql: """
                    INSERT INTO push_devices (provider, token, client_id, device_id, keys, created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (provider, token) DO UPDATE SET
                        created_at = CASE WHEN client_id = excluded.client_id THEN created_at ELSE excluded.created_at END,
                        client_id = excluded.client_id, device_id = excluded.device_id, keys = excluded.keys,
                        updated_at = excluded.updated_at
                    """,
                arguments: [
                    record.provider, record.token, record.clientID, record.deviceID, record.keysJSON, record.createdAt, record.updatedAt,
                ])
            let extra = try Row.fetchAll(
                db,
                sql: """
                    SELECT provider, token FROM push_devices WHERE client_id = ?
                    ORDER BY updated_at DESC LIMIT -1 OFFSET ?
                    """, arguments: [record.clientID, cap])
            for row in extra {
                try db.execute(
                    sql: "DELETE FROM push_devices WHERE provider = ? AND token = ?", arguments: [row["provider"], row["token"]])
            }
            return PushDeviceRegistration(
                movedFrom: holder == record.clientID ? nil : holder,
                dropped: extra.map { .init(provider: $0["provider"], token: $0["token"]) })
        }
    }

    func pushDevices(of clientID: String) async throws -> [PushDeviceRecord] {
        try await db.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT provider, token, device_id, keys, created_at, updated_at FROM push_devices
                    WHERE client_id = ? ORDER BY updated_at DESC
                    """, arguments: [clientID]
            ).map {
                PushDeviceRecord(
                    clientID: clientID,
                    device: PushDevice(provider: $0["provider"], token: $0["token"], keys: PushSubscriptionKeys(stored: $0["keys"])),
                    deviceID: $0["device_id"], createdAt: $0["created_at"], updatedAt: $0["updated_at"])
            }
        }
    }

    func pushDevices(ofEach clientIDs: [String]) async throws -> [PushDeviceRecord] {
        var found: [PushDeviceRecord] = []
        // 500 ids a statement: far under SQLite's limit on bound variables.
        for start in stride(from: 0, to: clientIDs.count, by: 500) {
            let chunk = Array(clientIDs[start..<min(start + 500, clientIDs.count)])
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            found += try await db.read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT client_id, provider, token, device_id, keys, created_at, updated_at FROM push_devices
                        WHERE client_id IN (\(marks)) ORDER BY client_id, updated_at DESC
                        """, arguments: StatementArguments(chunk)
                ).map {
                    PushDeviceRecord(
                        clientID: $0["client_id"],
                        device: PushDevice(provider: $0["provider"], token: $0["token"], keys: PushSubscriptionKeys(stored: $0["keys"])),
                        deviceID: $0["device_id"], createdAt: $0["created_at"], updatedAt: $0["updated_at"])
                }
            }
        }
        return found
    }

    func removePushDevices(of clientID: String, provider: String?, token: String?, deviceID: String?) async throws -> Int {
        try await db.write { db in
            var removed = 0
            if let token {
                try db.execute(
                    sql: "DELETE FROM push_devices WHERE client_id = ? AND token = ? AND (? IS NULL OR provider = ?)",
                    arguments: [clientID, token, provider, provider])
                removed += db.changesCount
            }
            if let deviceID, !deviceID.isEmpty {
                try db.execute(sql: "DELETE FROM push_devices WHERE client_id = ? AND device_id = ?", arguments: [clientID, deviceID])
                removed += db.changesCount
            }
            return removed
        }
    }
}
