import Crypto
import Foundation

/// Whether a presented secret (token, webhook secret, signature) equals the expected one, compared as
/// HMACs under a random key, so the time taken says nothing about the secret.
func secretsMatch(_ presented: Data, _ expected: Data) -> Bool {
    let key = SymmetricKey(size: .bits256)
    return HMAC<SHA256>.authenticationCode(for: presented, using: key) == HMAC<SHA256>.authenticationCode(for: expected, using: key)
}
