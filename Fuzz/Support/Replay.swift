import Foundation

/// A fuzz target's entry point: what libFuzzer calls with each input.
public typealias FuzzEntry = @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt

#if FUZZING
    /// libFuzzer's driver, for programs that have a main of their own (LLVM's `FuzzerInterface.h`).
    @_silgen_name("LLVMFuzzerRunDriver")
    private func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: FuzzEntry
    ) -> CInt
#endif

/// Runs a fuzz target: built for fuzzing (`make fuzz`: libFuzzer's coverage flags and `-DFUZZING`), hands
/// the command line to libFuzzer; otherwise runs `entry` on each file named on the command line, as libFuzzer would (a crash
/// the fuzzer found is replayed with `swift run fuzz-… crash-file`).
public func fuzzMain(_ entry: FuzzEntry) throws {
    #if FUZZING
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, entry))
    #else
        for path in CommandLine.arguments.dropFirst() {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            _ = data.withUnsafeBytes { entry($0.bindMemory(to: UInt8.self).baseAddress, data.count) }
            print("ok \(path)")
        }
    #endif
}
