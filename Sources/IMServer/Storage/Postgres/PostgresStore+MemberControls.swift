import Foundation
import PostgresNIO

/// Mutes, block lists and roles of conversations (`member_controls`, migration 3).
extension PostgresStore {
    static func memberControlTables(schema s: String) -> [String] {
        [
            """
            CREATE TABLE \(s).member_controls (
                cid TEXT NOT NULL REFERENCES \(s).conversations(id) ON DELETE CASCADE,
                kind TEXT NOT NULL,
                client_id TEXT NOT NULL,
                value TEXT,
                until BIGINT,
                by TEXT NOT NULL,
                at BIGINT NOT NULL,
                PRIMARY KEY (cid, kind, client_id)
            )
            """
        ]
    }

    static func memberControls(_ run: Runner, cid: String, now: Int64) async throws -> [MemberControl] {
        try await run(
            """
            SELECT kind, client_id, value, until, by, at FROM member_controls
            WHERE cid = \(cid) AND (until IS NULL OR until > \(now)) ORDER BY at, client_id
            """
        ).compactMap { row in
            let (kind, clientID, value, until, by, at) = try row.decode((String, String, String?, Int64?, String, Int64).self)
            return MemberControl.Kind(rawValue: kind).map {
                MemberControl(kind: $0, clientID: clientID, value: value, until: until, by: by, at: at)
            }
        }
    }

    func memberControls(cid: String, now: Int64) async throws -> [MemberControl] {
        try await logged { try await Self.memberControls(fetch, cid: cid, now: now) }
    }

    func setMemberControls(
        cid: String, kind: MemberControl.Kind, clientIDs: [String], on: Bool, value: String?, until: Int64?, by: String, now: Int64
    ) async throws -> [String] {
        try await logged {
            try await transaction { connection -> [String] in
                let run = Self.runner(connection, logger)
                _ = try await run("DELETE FROM member_controls WHERE cid = \(cid) AND until IS NOT NULL AND until <= \(now)")
                let rows: [PostgresRow]
                if on {
                    rows = try await run(
                        """
                        INSERT INTO member_controls (cid, kind, client_id, value, until, by, at)
                        SELECT \(cid), \(kind.rawValue), id, \(value), \(until), \(by), \(now) FROM unnest(\(clientIDs)::text[]) AS id
                        ON CONFLICT (cid, kind, client_id) DO UPDATE SET value = EXCLUDED.value, until = EXCLUDED.until,
                            by = EXCLUDED.by, at = EXCLUDED.at
                        RETURNING client_id
                        """)
                } else {
                    rows = try await run(
                        """
                        DELETE FROM member_controls WHERE cid = \(cid) AND kind = \(kind.rawValue) AND client_id = ANY(\(clientIDs))
                        RETURNING client_id
                        """)
                }
                let touched = Set(try rows.map { try $0.decode(String.self) })
                var changed: [String] = []
                for id in clientIDs where touched.contains(id) && !changed.contains(id) { changed.append(id) }
                return changed
            }
        }
    }
}
