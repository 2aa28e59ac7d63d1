import Foundation

/// The executables built beside the running test binary, for tests that start them as child
/// processes: with `--scratch-path` (the sanitizer builds, `.build-tsan`) they are there, not
/// in `.build/debug`, and built with the same sanitizer.
public enum BuiltProducts {
    /// The products directory: the test binary's (Linux: `<scratch>/<triple>/debug/`).
    public static let directory: URL = {
        let binary = Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])
        return binary.resolvingSymlinksInPath().deletingLastPathComponent()
    }()

    /// The path of the product `name` built with the tests, or `fallback` (the package's
    /// `.build/debug/name`) when the products directory has none.
    public static func path(_ name: String, fallback: URL) -> String {
        let built = directory.appendingPathComponent(name).path
        return FileManager.default.isExecutableFile(atPath: built) ? built : fallback.path
    }
}
