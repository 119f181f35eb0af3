import Foundation

/// Built-in typed message kinds (`_lctype`). Positive numbers are application-defined.
public enum MessageType: Int, Sendable, CaseIterable {
    case text = -1
    case image = -2
    case audio = -3
    case video = -4
    case location = -5
    case file = -6
    /// A recalled message's placeholder content.
    case recalled = -127

    public var name: String {
        switch self {
        case .text: "text"
        case .image: "image"
        case .audio: "audio"
        case .video: "video"
        case .location: "location"
        case .file: "file"
        case .recalled: "recalled"
        }
    }
}

/// A file attached to an image, audio, video or file message (`_lcfile`).
public struct FileInfo: Sendable, Hashable, Codable {
    public var url: String
    public var objId: String?
    public var name: String?
    public var format: String?
    public var size: Int64?
    public var width: Int?
    public var height: Int?
    /// Duration in seconds (audio and video).
    public var duration: Double?

    public init(
        url: String, objId: String? = nil, name: String? = nil, format: String? = nil, size: Int64? = nil,
        width: Int? = nil, height: Int? = nil, duration: Double? = nil
    ) {
        self.url = url
        self.objId = objId
        self.name = name
        self.format = format
        self.size = size
        self.width = width
        self.height = height
        self.duration = duration
    }
}

/// A geographic point (`_lcloc`).
public struct Location: Sendable, Hashable, Codable {
    public var latitude: Double
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }
}

/// The content of a typed message in LeanCloud's typed JSON (`_lctype`, `_lctext`, `_lcattrs`,
/// `_lcfile`, `_lcloc`). Custom types keep their own top-level fields in `fields`.
public struct TypedMessage: Sendable, Equatable {
    public var type: Int
    public var text: String?
    public var attributes: [String: JSONValue]?
    public var file: FileInfo?
    public var location: Location?
    /// Top-level keys other than the `_lc*` ones (the fields of custom types).
    public var fields: [String: JSONValue]

    public init(
        type: Int, text: String? = nil, attributes: [String: JSONValue]? = nil, file: FileInfo? = nil,
        location: Location? = nil, fields: [String: JSONValue] = [:]
    ) {
        self.type = type
        self.text = text
        self.attributes = attributes
        self.file = file
        self.location = location
        self.fields = fields
    }

    public static func text(_ text: String, attributes: [String: JSONValue]? = nil) -> TypedMessage {
        TypedMessage(type: MessageType.text.rawValue, text: text, attributes: attributes)
    }

    /// The built-in kind, or nil for a custom type.
    public var builtinType: MessageType? { MessageType(rawValue: type) }

    /// Decodes a message body; nil when the body is not a typed message (no integer `_lctype`).
    public static func decode(_ body: String) -> TypedMessage? {
        guard body.first == "{", case .object(var object)? = JSONValue.parse(body),
            let type = object.removeValue(forKey: "_lctype")?.intValue, type >= Int64(Int32.min), type <= Int64(Int32.max)
        else { return nil }
        var message = TypedMessage(type: Int(type))
        message.text = object.removeValue(forKey: "_lctext")?.stringValue
        message.attributes = object.removeValue(forKey: "_lcattrs")?.objectValue
        if let file = object.removeValue(forKey: "_lcfile")?.objectValue, let url = file["url"]?.stringValue {
            let meta = file["metaData"]?.objectValue ?? [:]
            message.file = FileInfo(
                url: url, objId: file["objId"]?.stringValue, name: meta["name"]?.stringValue,
                format: meta["format"]?.stringValue, size: meta["size"]?.intValue.map { Int64($0) },
                width: meta["width"]?.intValue, height: meta["height"]?.intValue,
                duration: meta["duration"]?.doubleValue)
        }
        if let loc = object.removeValue(forKey: "_lcloc")?.objectValue,
            let lat = loc["latitude"]?.doubleValue, let lon = loc["longitude"]?.doubleValue
        {
            message.location = Location(latitude: lat, longitude: lon)
        }
        message.fields = object
        return message
    }

    /// The typed JSON body.
    public func encoded() -> String {
        // A message with only a type, a text and attributes (a bot's reply, most of what clients send) is written
        // directly, in the order `jsonValue`'s sorted keys give ("_lcattrs", "_lctext", "_lctype"), without building
        // the dictionary and sorting it first (issue 30: a measured share of the bot's sends).
        guard fields.isEmpty, file == nil, location == nil else { return jsonValue.jsonString() }
        return JSONOutput.with { output in
            output.append(.openBrace)
            if let attributes {
                output.appendJSONRaw(#""_lcattrs":"#)
                output.appendJSONObject(attributes)
                output.append(.comma)
            }
            if let text {
                output.appendJSONRaw(#""_lctext":"#)
                output.appendJSONString(text)
                output.append(.comma)
            }
            output.appendJSONRaw(#""_lctype":"#)
            output.appendJSONInt(type)
            output.append(.closeBrace)
            return String(decoding: output.bytes, as: UTF8.self)
        }
    }

    public var jsonValue: JSONValue {
        var object = fields
        object["_lctype"] = .int(type)
        if let text { object["_lctext"] = .string(text) }
        if let attributes { object["_lcattrs"] = .object(attributes) }
        if let file {
            var meta: [String: JSONValue] = [:]
            if let v = file.name { meta["name"] = .string(v) }
            if let v = file.format { meta["format"] = .string(v) }
            if let v = file.size { meta["size"] = .int(Int(v)) }
            if let v = file.width { meta["width"] = .int(v) }
            if let v = file.height { meta["height"] = .int(v) }
            if let v = file.duration { meta["duration"] = .double(v) }
            var f: [String: JSONValue] = ["url": .string(file.url)]
            if let objId = file.objId { f["objId"] = .string(objId) }
            if !meta.isEmpty { f["metaData"] = .object(meta) }
            object["_lcfile"] = .object(f)
        }
        if let location {
            object["_lcloc"] = ["latitude": .double(location.latitude), "longitude": .double(location.longitude)]
        }
        return .object(object)
    }
}
