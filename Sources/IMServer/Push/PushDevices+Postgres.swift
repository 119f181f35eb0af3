import Foundation
import IMCore
import PostgresNIO
import PushProviders

/// `push_devices` in the shared PostgreSQL store (migration 10, `push-devices`).
enum PostgresPushDevices {
    static func tables(schema s: String) -> [String] {
        [
            """
            CREATE TABLE \(s).push_devices (
                provider TEXT NOT NULL,
                token TEXT NOT NULL,
                client_id TEXT NOT NULL,
                device_id TEXT NOT NULL DEFAULT '',
                keys TEXT,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL,
                PRIMARY KEY (provider, token)
            )
            """,
            "CREATE INDEX push_devices_by_client ON \(s).push_devices (client_id, updated_at)",
        ]
    }
}

extension PostgresStore: PushDeviceStore {
    func registerPushDevice(_ record: PushDeviceRecord, cap: Int) async throws -> PushDeviceRegistration {
        let (client, provider, token, device) = (record.clientID, record.provider, record.token, record.deviceID)
        return try await transaction { connection in
            if !device.isEmpty {
                _ = try await connection.query(
                    """
                    DELETE FROM push_devices WHERE client_id = \(client) AND device_id = \(device) AND provider = \(provider)
                    AND token <> \(token)
                    """, logger: logger
                ).collect()
            }
            // The row is locked, so a login on another node that takes the token at once waits for this one.
            let holder = try await connection.query(
                "SELECT client_id FROM push_devices WHERE provider = \(provider) AND token = \(token) FOR UPDATE", logger: logger
            ).collect().first?.decode(String.self)
            _ = try await connection.query(
                """
                INSERT INTO push_devices (provider, token, client_id, device_id, keys, created_at, updated_at)
                VALUES (\(provider), \(token), \(client), \(device), \(record.keysJSON), \(record.createdAt), \(record.updatedAt))
                ON CONFLICT (provider, token) DO UPDATE SET
                    created_at = CASE WHEN push_devices.client_id = EXCLUDED.client_id THEN push_devices.created_at
                        ELSE EXCLUDED.created_at END,
                    client_id = EXCLUDED.client_id, device_id = EXCLUDED.device_id, keys = EXCLUDED.keys,
                    updated_at = EXCLUDED.updated_at
                """, logger: logger
            ).collect()
            let dropped = try await connection.query(
                """
                DELETE FROM push_devices WHERE (provider, token) IN (
                    SELECT provider, token FROM push_devices WHERE client_id = \(client)
                    ORDER BY updated_at DESC OFFSET \(Int64(cap)))
                RETURNING provider, token
                """, logger: logger
            ).collect().map { row in
                let (provider, token) = try row.decode((String, String).self)
                return PushDevice(provider: provider, token: token)
            }
            return PushDeviceRegistration(movedFrom: holder == client ? nil : holder, dropped: dropped)
        }
    }

    func pushDevices(of clientID: String) async throws -> [PushDeviceRecord] {
        try await fetch(
            """
            SELECT provider, token, device_id, keys, created_at, updated_at FROM push_devices
            WHERE client_id = \(clientID) ORDER BY updated_at DESC
            """
        ).map { row in
            let (provider, token, device, keys, createdAt, updatedAt) = try row.decode((String, String, String, String?, Int64, Int64).self)
            return PushDeviceRecord(
                clientID: clientID, device: PushDevice(provider: provider, token: token, keys: PushSubscriptionKeys(stored: keys)),
                deviceID: device,
                createdAt: createdAt, updatedAt: updatedAt)
        }
    }

    func pushDevices(ofEach clientIDs: [String]) async throws -> [PushDeviceRecord] {
        guard !clientIDs.isEmpty else { return [] }
        return try await fetch(
            """
            SELECT client_id, provider, token, device_id, keys, created_at, updated_at FROM push_devices
            WHERE client_id = ANY(\(clientIDs)) ORDER BY client_id, updated_at DESC
            """
        ).map { row in
            let (clientID, provider, token, device, keys, createdAt, updatedAt) = try row.decode(
                (String, String, String, String, String?, Int64, Int64).self)
            return PushDeviceRecord(
                clientID: clientID, device: PushDevice(provider: provider, token: token, keys: PushSubscriptionKeys(stored: keys)),
                deviceID: device,
                createdAt: createdAt, updatedAt: updatedAt)
        }
    }

    func removePushDevices(of clientID: String, provider: String?, token: String?, deviceID: String?) async throws -> Int {
        let device = deviceID ?? ""
        return try await fetch(
            """
            DELETE FROM push_devices WHERE client_id = \(clientID)
            AND ((\(token)::text IS NOT NULL AND token = \(token) AND (\(provider)::text IS NULL OR provider = \(provider)))
                OR (\(device) <> '' AND device_id = \(device)))
            RETURNING token
            """
        ).count
    }
}
