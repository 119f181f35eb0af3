/// A bounded memory of the most recently inserted keys, each with a value: at least the last `generation`
/// keys and fewer than twice as many. It keeps two generations of up to `generation` entries each; when the newer
/// one is full it becomes the older and the older is forgotten at once.
///
/// Written for the hot paths that only need "was this seen lately?" (the SDK's received message ids, the
/// server writer's recently stored messages). A ring with one removal per insert spent more on the removal,
/// which moves the entries after the hole, than on the insert (issue 30, rounds 7 and 8), and an LRU keeps
/// a list per entry that these callers never read.
///
/// Inlinable so that its users in other modules get it specialized for their key and value: unspecialized, the
/// writer's `insert` looked up generic metadata and went through value witnesses for every dictionary access
/// (about 5 % of the writer thread in w1b, issue 30 round 9).
public struct GenerationalMap<Key: Hashable, Value> {
    @usableFromInline var newer: [Key: Value] = [:]
    @usableFromInline var older: [Key: Value] = [:]
    /// Most entries one generation holds (at least 1).
    public let generation: Int

    @inlinable public init(generation: Int) { self.generation = max(1, generation) }

    /// The value remembered for `key`, if it is still remembered.
    @inlinable public subscript(key: Key) -> Value? { newer[key] ?? older[key] }

    /// Remembers `value` for `key`; false (and nothing changes) when `key` is already remembered.
    @inlinable @discardableResult
    public mutating func insert(_ value: Value, for key: Key) -> Bool {
        guard older[key] == nil, newer[key] == nil else { return false }
        newer[key] = value
        if newer.count >= generation {
            // The forgotten generation's storage is reused, so a full map allocates nothing per insert.
            swap(&newer, &older)
            newer.removeAll(keepingCapacity: true)
        }
        return true
    }

    /// How many entries are remembered (at least the last `generation` inserted, fewer than twice as many).
    @inlinable public var count: Int { newer.count + older.count }
}

extension GenerationalMap where Value == Void {
    /// Remembers `key`; false when it is already remembered.
    @inlinable @discardableResult
    public mutating func insert(_ key: Key) -> Bool { insert((), for: key) }

    @inlinable public func contains(_ key: Key) -> Bool { self[key] != nil }
}

extension GenerationalMap: Sendable where Key: Sendable, Value: Sendable {}
