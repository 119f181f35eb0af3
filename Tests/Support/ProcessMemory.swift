import Foundation

/// The test process's resident set size, in MiB (`VmRSS` in /proc/self/status), for memory ceilings.
public func residentMemoryMiB() throws -> Double {
    let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
        let kib = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    else { throw POSIXError(.EINVAL) }
    return kib / 1024
}
