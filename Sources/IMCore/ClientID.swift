/// Rules for client ids.
public enum ClientID {
    public static let maxLength = 64

    /// Returns an `IMError` (4103) when `id` is not a valid client id: 1–64 characters, no control characters.
    public static func validate(_ id: String?) -> IMError? {
        guard let id, !id.isEmpty else { return IMError(.invalidLogin, "client id is empty") }
        if id.count > maxLength { return IMError(.invalidLogin, "client id is longer than \(maxLength) characters") }
        if id.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return IMError(.invalidLogin, "client id contains control characters")
        }
        return nil
    }
}
