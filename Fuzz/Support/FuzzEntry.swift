import Foundation

// Every fuzz target's `main`. Built for fuzzing (`-sanitize=fuzzer -DFUZZING`, Fuzz/lib.sh), it
// hands the harness's `LLVMFuzzerTestOneInput` to libFuzzer's driver; built plainly (as
// `swift build` builds every target), it replays the files and directories named on the
// command line through the same function, so a crash artifact reproduces without the fuzzer.

@_silgen_name("LLVMFuzzerTestOneInput")
private func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt

#if FUZZING
    @_silgen_name("LLVMFuzzerRunDriver")
    private func runDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt
#endif

package enum FuzzEntry {
    package static func main() -> Never {
        #if FUZZING
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(runDriver(&argc, &argv) { data, size in testOneInput(data, size) })
        #else
            var replayed = 0
            for path in CommandLine.arguments.dropFirst() {
                for file in Self.files(at: path) {
                    let bytes = [UInt8](FileManager.default.contents(atPath: file) ?? Data())
                    _ = bytes.withUnsafeBufferPointer { testOneInput($0.baseAddress, $0.count) }
                    replayed += 1
                }
            }
            print("replayed \(replayed) inputs without a crash (built without -DFUZZING: no fuzzing)")
            exit(0)
        #endif
    }

    private static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.sorted().map { path + "/" + $0 }
    }
}
