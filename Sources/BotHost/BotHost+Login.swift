import Foundation
import IMClient
import IMCore

/// Logging in, and telling people when the bot's login or role is not what moderation needs.
extension BotHost {
    /// Logs in (forced, so a restarted bot takes over its tag). A refused login says why in the log:
    /// 4102 for an interceptor means the bot's `--interceptor-secret` is missing or not the server's.
    func logIn() async throws {
        let id = configuration.clientID
        let hint =
            configuration.interceptorSecret == nil
            ? "the server lists \(id) as its interceptor: start the bot with --interceptor-secret SECRET "
                + "(or interceptor_secret under [bot]), the secret of the server's --interceptor \(id)=SECRET"
            : "the bot's --interceptor-secret (interceptor_secret under [bot]) is not the one the server has for \(id) "
                + "(--interceptor \(id)=SECRET)"
        do {
            try await client.open(force: true)
        } catch {
            if error.knownCode == .signatureFailed {
                let said = "\(error)"
                logger.error(
                    "the server refused the bot's login (4102 SIGNATURE_FAILED)", metadata: ["error": "\(said)", "hint": "\(hint)"])
            }
            throw error
        }
        await warnUnlessInterceptor()
    }

    /// Asks the server whether it lists the bot as its interceptor (a `hook verdict` that answers no
    /// request: acknowledged for an interceptor, refused with 4904 otherwise) and warns when it does not:
    /// then the plugins see messages only after delivery.
    func warnUnlessInterceptor() async {
        let probe = HookVerdict.allow.command(id: "hookbot-role-check")
        do {
            _ = try await client.send(probe)
        } catch  where error.knownCode == .notInterceptor {
            logger.warning(
                "the server does not list this bot as its interceptor: messages are delivered before the plugins see them, so moderation can only act after delivery",
                metadata: [
                    "client": "\(configuration.clientID)",
                    "hint":
                        "start the server with --interceptor \(configuration.clientID)=SECRET and the bot with --interceptor-secret SECRET",
                ])
        } catch {
            logger.debug("could not ask the server whether the bot is its interceptor", metadata: ["error": "\(error)"])
        }
    }
}
