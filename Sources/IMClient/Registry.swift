import Foundation
import IMCore
import Synchronization

/// An application-defined typed message: a Swift type bound to a positive `_lctype`.
///
/// Register the type with an `IMMessageRegistry` so that received messages of that `_lctype` decode to it.
/// `Codable` types get both methods for free: their coding keys become top-level keys of the typed JSON
/// (use the key `_lctext` for text and `_lcattrs` for attributes to fill the standard fields).
public protocol IMCustomMessage: Sendable {
    /// The `_lctype`; must be positive.
    static var messageType: Int { get }
    /// Decodes a received typed message whose `type` is `messageType`.
    init(typedMessage: TypedMessage) throws
    /// Encodes the value; the SDK sets `type` to `messageType`.
    func typedMessage() throws -> TypedMessage
}

extension IMCustomMessage where Self: Codable {
    public init(typedMessage: TypedMessage) throws {
        self = try JSONDecoder().decode(Self.self, from: Data(typedMessage.encoded().utf8))
    }

    public func typedMessage() throws -> TypedMessage {
        let value = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(self))
        guard var object = value.objectValue else {
            throw IMError(.invalidArgument, "\(Self.self) must encode to a JSON object")
        }
        object["_lctype"] = .int(Self.messageType)
        guard let typed = TypedMessage.decode(JSONValue.object(object).jsonString()) else {
            throw IMError(.invalidArgument, "\(Self.self) did not encode to a typed message")
        }
        return typed
    }
}

extension IMCustomMessage {
    /// The typed message with its `type` set to `messageType`.
    func encodedTypedMessage() throws -> TypedMessage {
        var typed = try typedMessage()
        typed.type = Self.messageType
        return typed
    }
}

/// Maps positive `_lctype` values to Swift types (LeanCloud's `registerSubclass`). Messages of types that
/// are not registered, or that fail to decode, still arrive as `IMMessageContent.typed`.
public final class IMMessageRegistry: Sendable {
    /// The registry clients use unless given another one.
    public static let shared = IMMessageRegistry()

    private let types = Mutex<[Int: any IMCustomMessage.Type]>([:])

    public init() {}

    /// Registers `type` for `T.messageType`, replacing an earlier registration of that number.
    public func register<T: IMCustomMessage>(_ type: T.Type) throws(IMError) {
        guard T.messageType > 0 else {
            throw IMError(.invalidArgument, "custom message types must be positive; \(T.self) uses \(T.messageType)")
        }
        types.withLock { $0[T.messageType] = type }
    }

    /// Removes the registration of `messageType`.
    public func unregister(_ messageType: Int) {
        _ = types.withLock { $0.removeValue(forKey: messageType) }
    }

    /// The Swift type registered for `messageType`.
    public func registeredType(for messageType: Int) -> (any IMCustomMessage.Type)? {
        types.withLock { $0[messageType] }
    }

    /// Decodes `typed` to its registered type; nil when none is registered or decoding fails.
    func decode(_ typed: TypedMessage) -> (any IMCustomMessage)? {
        guard let type = registeredType(for: typed.type) else { return nil }
        return try? type.init(typedMessage: typed)
    }
}
