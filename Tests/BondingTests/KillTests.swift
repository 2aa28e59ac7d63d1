import Bonding
import Foundation
import HCI
import SMP
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A writer killed with SIGKILL at any moment leaves a store that loads, complete: the previous
/// or the next version, never a mix or a torn file. The writer is a separate process
/// (BondStoreStressWriter), rewriting the store as fast as it can; this test kills it at random
/// moments, many times, and loads the store after each kill.
struct KillTests {
    static let writerName = "BondStoreStressWriter"

    /// The directories the writer is looked for in: beside the test binary (SwiftPM builds every
    /// target's products into one directory), then the package's `.build/debug`.
    static var searchedDirectories: [URL] {
        var directories: [URL] = []
        // The test binary (Linux: .build/<triple>/debug/<package>PackageTests.xctest) or, on
        // macOS, a file inside the .xctest bundle: its ancestors up to the products directory.
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        for _ in 0..<4 {
            url.deleteLastPathComponent()
            directories.append(url)
        }
        directories.append(Bundle.main.bundleURL.deletingLastPathComponent())
        let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        directories.append(package.appendingPathComponent(".build/debug"))
        return directories
    }

    static var writer: URL? {
        searchedDirectories.map { $0.appendingPathComponent(writerName) }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    /// What BondStoreStressWriter stores in version `g` (the same rule as its main.swift).
    static func expectedBond(version g: UInt32) -> Bond {
        var bond = Bond(peerIdentity: LEAddress(.publicDevice, BluetoothAddress(value: UInt64(g % 3))))
        bond.peerSignCounter = g
        bond.localSignCounter = g &* 2_654_435_761
        bond.serviceChangedPending = g % 2 == 1
        bond.peerDatabaseHash = (0..<16).map { UInt8(truncatingIfNeeded: g >> ($0 % 4 * 8)) }
        for h in 0..<UInt16(g % 40) { bond.cccdValues[0x100 + h] = UInt16(truncatingIfNeeded: g) &+ h }
        bond.centralLTK = SMPLongTermKey(key: [UInt8](repeating: 0x5A, count: 16), ediv: 0, rand: 0, keySize: 16,
                                         authenticated: true, secureConnections: true)
        return bond
    }

    /// Microseconds for the writer to start and write 20 versions, measured on a store of its own:
    /// one run that only starts (0 versions) and one that writes 50, each timed to its exit.
    static func calibratedKillBound(writer: URL, in directory: URL) throws -> UInt32 {
        func timedRun(versions: Int) throws -> Duration {
            let store = directory.appendingPathComponent("calibration-\(versions)")
            let process = Process()
            process.executableURL = writer
            process.arguments = [store.path, String(versions)]
            process.standardOutput = FileHandle.nullDevice
            let started = ContinuousClock.now
            try process.run()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "the writer failed writing \(versions) versions")
            return ContinuousClock.now - started
        }
        let startUp = try timedRun(versions: 0)
        let fifty = try timedRun(versions: 50)
        let perVersion = max(fifty - startUp, .zero) / 50
        let bound = startUp + perVersion * 20
        // Capped at 2 s: a kill loop of 100 runs then stays within a few minutes.
        let microseconds = min(bound.components.seconds * 1_000_000 + bound.components.attoseconds / 1_000_000_000_000, 2_000_000)
        return UInt32(microseconds)
    }

    @Test func aWriterKilledAtRandomMomentsLeavesACompleteStore() throws {
        let writer = try #require(Self.writer, """
            \(Self.writerName) is not built: build every target (`swift build --build-tests`). Looked in:
            \(Self.searchedDirectories.map(\.path).joined(separator: "\n"))
            """)
        let dir = try TemporaryDirectory()
        let controller = LEAddress(.publicDevice, BluetoothAddress("00:11:22:33:44:55")!)
        let errors = dir.url.appendingPathComponent("writer-stderr")
        // Made here: a writer killed before it made the directory would leave none to look in.
        try FileManager.default.createDirectory(at: dir.store, withIntermediateDirectories: true)

        // Long enough for versions to be written (start-up takes some of it), short enough that
        // most kills land in a write: the writer does little else. 40 ms suits a plain build; an
        // instrumented writer (the thread sanitizer's) starts and writes several times slower,
        // so the bound follows the writer's measured speed: start-up plus 20 versions.
        let delays = 0...max(40_000, try Self.calibratedKillBound(writer: writer, in: dir.url))
        var highest: UInt32 = 0
        var localIRK: [UInt8]?
        var kills = 0
        var killsMidWrite = 0
        let started = ContinuousClock.now
        // At least 100 kills; more (within a time limit) on a machine too busy for the writer to
        // have written much, or for a kill to have landed inside a write, in those.
        while kills < 100 || (highest <= 100 || killsMidWrite == 0) && ContinuousClock.now - started < .seconds(30) {
            try Data().write(to: errors)
            let process = Process()
            process.executableURL = writer
            process.arguments = [dir.store.path]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = try FileHandle(forWritingTo: errors)
            try process.run()
            usleep(UInt32.random(in: delays))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let output = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            #expect(process.terminationReason == .uncaughtSignal, "the writer ended by itself: \(output)")
            #expect(output.isEmpty, "the writer reported: \(output)")
            kills += 1
            guard process.terminationReason == .uncaughtSignal else { break }
            // A temporary file left behind: this kill landed between its creation and the rename.
            let names = try FileManager.default.contentsOfDirectory(atPath: dir.store.path)
            if names.contains(where: { $0.contains(".tmp-") }) { killsMidWrite += 1 }

            let log = LogLines()
            let store = try BondStore(controllerIdentity: controller, directory: dir.store, logger: log.logger)
            #expect(log.lines.isEmpty, "\(log.lines)")
            let bonds = store.bonds
            guard !bonds.isEmpty else { continue }  // killed before its first write
            for bond in bonds {
                var expected = Self.expectedBond(version: bond.peerSignCounter)
                expected.createdAt = bond.createdAt
                expected.updatedAt = bond.updatedAt
                #expect(bond == expected)
            }
            // Versions only move forward: no write was lost or undone.
            let version = bonds.map(\.peerSignCounter).max()!
            #expect(version >= highest)
            #expect(bonds.count == min(Int(version), 3))
            highest = version
            // The writer makes its IRK before its first write: every version has it.
            if localIRK == nil { localIRK = store.localIRK }
            #expect(store.localIRK == localIRK)
        }
        // The writer did get to write, many times, and was killed inside writes.
        #expect(highest > 100, "only \(highest) versions written in \(kills) runs")
        #expect(killsMidWrite > 0, "no kill out of \(kills) landed inside a write")
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.store.path)
        #expect(!names.contains { $0.contains(".corrupt-") }, "\(names)")
    }
}
