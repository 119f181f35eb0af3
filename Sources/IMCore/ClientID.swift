/// Rules for client ids.
public enum ClientID {
    public static let maxLength = 64

    /// The character that separates the fields of signed texts (`app:client::t:n`, see IMSignatures): a
    /// client id holding it could make one action's text read as another's.
    public static let signatureSeparator: Character = ":"

    /// Returns an `IMError` (4103) when `id` is not a valid client id: 1–64 characters, no control
    /// characters, no `:`.
    public static func validate(_ id: String?) -> IMError? {
        guard let id, !id.isEmpty else { return IMError(.invalidLogin, "client id is empty") }
        if id.count > maxLength { return IMError(.invalidLogin, "client id is longer than \(maxLength) characters") }
        if id.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return IMError(.invalidLogin, "client id contains control characters")
        }
        if id.contains(signatureSeparator) {
            return IMError(.invalidLogin, "client id contains ':', which separates the fields of signed texts")
        }
        return nil
    }
}
