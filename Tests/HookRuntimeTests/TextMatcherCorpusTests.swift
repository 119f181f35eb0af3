import Foundation
import XCTest

@testable import HookRuntime

/// The shipped presets against the shipped benign corpus (plugins/tests/corpus/benign.txt, made by
/// scripts/generate-benign-corpus.py) and against disguised abuse they must still catch.
final class TextMatcherCorpusTests: XCTestCase {
    static let plugins = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("plugins")
    static let defaultPresets = ["en/profanity", "en/sexual", "en/slurs", "zh/profanity", "zh/sexual", "scam"]

    private func presetMatcher() throws -> TextMatcher {
        try TextMatcher(TextMatcher.Spec(presets: Self.defaultPresets), presetDirectory: Self.plugins)
    }

    private func firstHit(_ m: TextMatcher, _ text: String) -> MatcherHit? {
        var t = text
        return t.withUTF8 { m.hits(in: $0, limit: 1).hits.first }
    }

    func testBenignCorpusFalsePositiveRateIsUnderHalfAPercent() throws {
        let m = try presetMatcher()
        let text = try String(contentsOf: Self.plugins.appendingPathComponent("tests/corpus/benign.txt"), encoding: .utf8)
        let lines = text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
        XCTAssertGreaterThanOrEqual(lines.count, 5000)
        var flagged: [String] = []
        for line in lines {
            if let h = firstHit(m, line) {
                flagged.append("\(line)  <- \(h.preset ?? h.kind.rawValue): \(h.term)")
            }
        }
        let rate = Double(flagged.count) / Double(lines.count) * 100
        print(
            "benign corpus: \(flagged.count) of \(lines.count) messages flagged by the default presets "
                + "(\(String(format: "%.2f", rate)) %)")
        for f in flagged.prefix(20) { print("  flagged: \(f)") }
        XCTAssertLessThan(rate, 0.5)
    }

    func testDisguisedAbuseIsCaught() throws {
        let m = try presetMatcher()
        let bad = [
            "what the f u c k", "f.u.c.k off", "ｆｕｃｋ ｙｏｕ", "you are a b1tch", "this is bullsh1t", "$hit happens",
            "what an a$$hole", "fuuuuuck this", "FUCK", "motherfucker", "fück off", "Sh!t", "𝐟𝐮𝐜𝐤 you",
            "fu\u{200B}ck", "f-u-c-k-i-n-g idiot", "ѕhіt", "FREE NITRO click here", "free n1tro for everyone",
            "double your bitcoin now", "claim your prize at the link", "send nudes", "p0rn links", "ｐｏｒｎ",
            "you f a g g o t", "傻逼", "你是个傻 逼", "操你妈", "草泥马", "代开发票，量大从优", "兼职刷单日赚千元", "约炮吗",
            "免费领取iPhone", "恭喜您中奖了", "ｓｅｘｃａｍ live",
        ]
        var missed: [String] = []
        for text in bad where firstHit(m, text) == nil { missed.append(text) }
        XCTAssertEqual(missed, [], "known-bad messages the presets missed")
    }
}
