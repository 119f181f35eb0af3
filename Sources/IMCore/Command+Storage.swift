extension Command {
    /// A command's fields, shared by its copies until one of them changes a field.
    ///
    /// `@unchecked Sendable` is sound because a `Storage` is only ever written through `Command.uniqueStorage`,
    /// which first makes sure that the command being changed holds the only reference to it (else it copies
    /// the fields into a new one): a storage that two commands (or two threads) can see is never written again,
    /// only read, and a command being changed is itself under Swift's exclusive access. It is the same argument
    /// as for `Array`'s buffer.
    @usableFromInline final class Storage: @unchecked Sendable {
        /// Not checked for exclusivity at run time: every write goes through `uniqueStorage`, whose caller has
        /// exclusive (statically checked) access to the only command holding this storage, so no read can
        /// overlap a write; the run-time check would cost a call on each field access.
        @exclusivity(unchecked) @usableFromInline var fields: Fields

        @usableFromInline init(_ fields: Fields) {
            self.fields = fields
        }
    }

    /// The storage, copied first when another command shares it: what every field's setter writes to.
    @inlinable var uniqueStorage: Storage {
        mutating get {
            if !isKnownUniquelyReferenced(&storage) {
                storage = Storage(storage.fields)
            }
            return storage
        }
    }
}

/// Reflection (`dump`, `String(describing:)`, the tests' field-by-field comparisons) shows the fields, as it
/// did when they were the struct's own, not the storage that holds them.
extension Command: CustomReflectable {
    public var customMirror: Mirror {
        Mirror(self, children: Mirror(reflecting: storage.fields).children, displayStyle: .struct)
    }
}
