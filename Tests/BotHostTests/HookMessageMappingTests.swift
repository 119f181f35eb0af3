import BotRouting
import HookRuntime
import IMCore
import XCTest

/// The bot host hands plugins a received message built from the body its client already decoded
/// (`HookMessage(…typed:…)`), instead of encoding that body again and parsing it a second time
/// (`HookMessage(…body:…)`): plugins must see the same table either way.
final class HookMessageMappingTests: XCTestCase {
    func testADecodedBodyGivesPluginsTheSameMessageAsItsText() throws {
        let bodies = [
            #"{"_lctype":-1,"_lctext":"ping 42 🎉 @Jerry","_lcattrs":{"mentions":["Jerry"],"translate":"zh-CN"}}"#,
            #"{"_lctype":-2,"_lctext":"日落 🌇","_lcfile":{"objId":"3xI0FTCjyExM7cNoZ_XdQQ","url":"http://127.0.0.1:8080/media/3xI0FTCjyExM7cNoZ_XdQQ/sunset.png","metaData":{"name":"sunset.png","format":"png","size":102400,"width":640,"height":480}}}"#,
            #"{"_lctype":-5,"_lctext":"我在这里","_lcloc":{"latitude":31.2304,"longitude":121.4737}}"#,
            #"{"_lctype":7,"question":"午饭吃什么？🍜","options":["面","饭"],"votes":{"面":2},"_lcattrs":{"poll":true}}"#,
            #"{"_lctype":-1,"_lctext":""}"#,
        ]
        for body in bodies {
            let typed = try XCTUnwrap(TypedMessage.decode(body), body)
            let decoded = HookMessage(
                id: "m1", cid: "c1", from: "Tom", typed: typed, timestamp: 1_795_000_000_000, transient: false)
            // What the host did before: the client's decoded body encoded again, then parsed.
            let reparsed = HookMessage(
                id: "m1", cid: "c1", from: "Tom", body: typed.encoded(), timestamp: 1_795_000_000_000, transient: false)
            XCTAssertEqual(decoded, reparsed, body)
            XCTAssertEqual(
                decoded,
                HookMessage(id: "m1", cid: "c1", from: "Tom", body: body, timestamp: 1_795_000_000_000, transient: false), body)
        }
        let image = try XCTUnwrap(TypedMessage.decode(bodies[1]))
        let message = HookMessage(id: "m2", cid: "c1", from: "Tom", typed: image, timestamp: 1, transient: true)
        XCTAssertEqual(message.text, "日落 🌇")
        XCTAssertEqual(message.file?.url, "http://127.0.0.1:8080/media/3xI0FTCjyExM7cNoZ_XdQQ/sunset.png")
        XCTAssertTrue(message.transient)
    }
}
