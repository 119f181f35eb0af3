import ArgumentParser
import Benchmarks
import Foundation

struct BenchSubcommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Run the benchmark workloads (w1a, w1b, w2, w3, w4, idle, hooks, media; push when named) and print one JSON object.",
        discussion: "With --database, w1a, w1b, w2 and w3 run on PostgreSQL (a new schema per workload) instead of SQLite.")

    @Flag(help: "Smaller message counts, for a quick look.") var quick = false
    @Flag(help: "Use SQLite synchronous=NORMAL (WAL survives a process crash, not a power loss).") var relaxedSync = false
    @Option(help: "Only these workloads (comma-separated: w1a,w1b,w2,w3,w4,idle,hooks,media,push).") var only: String?
    @Flag(help: "Run the bot as a separate process over WebSocket instead of attached in process.") var remoteBot = false
    @Flag(help: "After the JSON, print a short summary table.") var summary = false
    @OptionGroup var store: DatabaseOption
    @Option(help: "With --database: server nodes sharing it (w3's members spread over them, w1b's user on a node without the bot).")
    var nodes = 1

    func run() async throws {
        let known = ["w1a", "w1b", "w2", "w3", "w4", "idle", "hooks", "media", "push"]
        // `push` sends 1.9 million notifications (minutes): only when named.
        let workloads = Set((only ?? known.filter { $0 != "push" }.joined(separator: ",")).split(separator: ",").map(String.init))
        guard workloads.isSubset(of: known) else {
            throw ValidationError(
                "unknown workload(s) \(workloads.subtracting(known).sorted().joined(separator: ",")); known: \(known.joined(separator: ","))"
            )
        }
        guard nodes >= 1, nodes == 1 || store.database != nil else { throw ValidationError("--nodes needs --database") }
        guard store.database == nil || !remoteBot else { throw ValidationError("--database runs the bot in process; drop --remote-bot") }
        let report = try await BenchReport.run(
            workloads, quick: quick, relaxedSync: relaxedSync, remoteBot: remoteBot,
            database: try store.url(),
            nodes: nodes)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        print(String(decoding: try encoder.encode(report), as: UTF8.self))
        if summary { print(report.summaryTable) }
    }
}
