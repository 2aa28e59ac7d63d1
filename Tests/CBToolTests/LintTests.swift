import DelegateLint
import Foundation
import Testing

/// `cbtool lint`: its table of requirements is our protocols', it finds every mistake planted
/// in LintSamples/ and nothing else, and nothing in Examples/.
@Suite struct LintTests {
    static let samples = Repository.root.appendingPathComponent("Tests/CBToolTests/LintSamples").path

    @Test func theRequirementTableIsTheDelegateProtocols() throws {
        let sources = Repository.root.appendingPathComponent("Sources/CoreBluetooth").path
        let files = try DelegateLinter.swiftFiles(at: [sources]).filter {
            let name = ($0 as NSString).lastPathComponent
            return name.hasPrefix("CB") && name.hasSuffix("Delegate.swift")
        }
        var declared: [DelegateRequirement] = []
        for file in files {
            declared += DelegateRequirement.requirements(declaredIn: try String(contentsOfFile: file, encoding: .utf8))
        }
        #expect(Set(declared.map(\.protocolName)) == ["CBCentralManagerDelegate", "CBPeripheralDelegate", "CBPeripheralManagerDelegate"])
        #expect(declared.count == DelegateRequirement.all.count)
        #expect(Set(declared) == Set(DelegateRequirement.all), "copy the protocols' requirements into DelegateRequirements.swift")
    }

    @Test func everyPlantedMistakeIsFoundAndNothingElse() throws {
        struct Expected: Hashable, CustomStringConvertible {
            var file: String, line: Int, kind: String, requirement: String
            var description: String { "\((file as NSString).lastPathComponent):\(line) \(kind) \(requirement)" }
        }
        var expected: Set<Expected> = []
        let files = try DelegateLinter.swiftFiles(at: [Self.samples])
        #expect(files.count >= 5)
        for file in files {
            let lines = try String(contentsOfFile: file, encoding: .utf8).components(separatedBy: "\n")
            for (index, line) in lines.enumerated() {
                guard let marker = line.range(of: "// expect-lint: ") else { continue }
                let fields = line[marker.upperBound...].split(separator: " ")
                expected.insert(Expected(file: file, line: index + 1, kind: String(fields[0]), requirement: String(fields[1])))
            }
        }
        #expect(expected.count >= 20)
        let (findings, count) = try DelegateLinter.lint(paths: [Self.samples])
        #expect(count == files.count)
        let found = Set(findings.map {
            Expected(file: $0.file, line: $0.line, kind: $0.kind.rawValue, requirement: $0.requirement.signature.name)
        })
        #expect(found.subtracting(expected).isEmpty, "reported but not planted: \(found.subtracting(expected).sorted { $0.description < $1.description })")
        #expect(expected.subtracting(found).isEmpty, "planted but not reported: \(expected.subtracting(found).sorted { $0.description < $1.description })")
        #expect(findings.count == found.count, "one finding per method")
    }

    @Test func theExamplesHaveNoFindings() throws {
        let (findings, files) = try DelegateLinter.lint(paths: [Repository.root.appendingPathComponent("Examples").path])
        #expect(files >= 20)
        #expect(findings.isEmpty, "\(findings.map(\.description).joined(separator: "\n"))")
    }

    @Test func aFindingSaysWhyAndWhatToWrite() throws {
        let source = """
            import CoreBluetooth
            final class Scanner: NSObject, CBCentralManagerDelegate {
                func centralManagerDidUpdateState(_ central: CBCentralManager) {}
                func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                                    advertisementData: [String: Any], RSSI: NSNumber) {}
                func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: NSError?) {}
            }
            final class Sub: Scanner {
                func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {}
            }
            """
        let findings = DelegateLinter.lint(sources: [("Scanner.swift", source)])
        #expect(findings.map(\.kind) == [.nearMiss, .nearMiss, .subclassOnly])
        let rssi = try #require(findings.first)
        #expect((rssi.line, rssi.column) == (4, 10))
        #expect(rssi.description == """
            Scanner.swift:4:10: warning: `centralManager(_:didDiscover:advertisementData:RSSI:)` in `Scanner` is never called: \
            it nearly matches CBCentralManagerDelegate's `centralManager(_:didDiscover:advertisementData:rssi:)` \
            (label `RSSI` should be `rssi`)
                write instead: func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral, \
            advertisementData: [String: Any], rssi RSSI: NSNumber)
            """)
        #expect(findings[1].reason.contains("`NSError?` should be `Error?`"))
        #expect(findings[1].fix == "write instead: func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?)")
        let subclass = findings[2]
        #expect(subclass.typeName == "Sub")
        #expect(subclass.reason.contains("`Scanner`, which it inherits from, conforms to CBCentralManagerDelegate"))
        #expect(subclass.fix.contains("declare it in the body of `Scanner`"))
        #expect(subclass.fix.contains("mark this one `override`"))
        #expect(subclass.fix.hasSuffix("func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {}"))
    }

    @Test func spellingsOfOneTypeAreOneType() {
        let source = """
            final class D: NSObject, CBPeripheralDelegate {
                func peripheral(_ p: CoreBluetooth.CBPeripheral, didReadRSSI value: NSNumber, error: Swift.Optional<any Error>) {}
                func peripheral(_ p: CBPeripheral, didOpen channel: Optional<CBL2CAPChannel>, error: (any Error)?) {}
                func peripheral(_ p: CBPeripheral, didModifyServices services: Array<CBService>) {}
            }
            """
        #expect(DelegateLinter.lint(sources: [("D.swift", source)]).isEmpty)
        // An implicitly unwrapped optional is an optional: a different parameter type.
        let swift2 = """
            final class D: NSObject, CBPeripheralDelegate {
                func peripheral(_ p: CBPeripheral!, didDiscoverServices error: Error!) {}
            }
            """
        let findings = DelegateLinter.lint(sources: [("D.swift", swift2)])
        #expect(findings.map(\.requirement.signature.name) == ["peripheral(_:didDiscoverServices:)"])
        #expect(findings.first?.reason.contains("parameter `peripheral` is `CBPeripheral!`, should be `CBPeripheral`") == true)
    }

    @Test func cbtoolLintFailsOnFindingsAndPassesOnExamples() {
        let bad = CapturedRun.run(["lint", Self.samples], radio: nil)
        #expect(bad.status == 1)
        #expect(bad.out.contains { $0.contains("PortedCentral.swift:") && $0.contains(": warning: ") })
        #expect(bad.errors.count == 1 && bad.errors[0].contains("delegate methods that will never be called"))

        let good = CapturedRun.run(["lint", Repository.root.appendingPathComponent("Examples").path], radio: nil)
        #expect(good.status == 0, "\(good.output)")
        #expect(good.out.last?.hasPrefix("lint: no findings in ") == true)

        let missing = CapturedRun.run(["lint", "/nonexistent/path"], radio: nil)
        #expect(missing.status == 1)
        #expect(missing.errors.first?.contains("no such file or directory") == true)
    }
}
