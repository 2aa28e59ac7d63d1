import Foundation
import HCI

// cbbench: the stack's benchmarks, run in a release build:
//   swift run -c release cbbench [--quick] [--json]
// Each workload prints a named figure; --json prints them as one JSON object.

struct Figure {
    var name: String
    var value: Double
    var unit: String
    var note: String
}

/// Runs `body` and returns the CPU seconds this process spent in it. CPU time, not wall time:
/// on a shared 2-core machine other processes stretch wall time but not our CPU time.
func measure(_ body: () -> Void) -> Double {
    func cpuNow() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
    let start = cpuNow()
    body()
    return cpuNow() - start
}

/// Decoding LE Advertising Report events from raw H4 frames, the scanner's hot path.
func advertisingReportDecode(count: Int) -> [Figure] {
    // A typical report: ADV_IND from a random address with 31 bytes of data, RSSI −60.
    let report = LEAdvertisingReport(reports: [LEAdvertisingReport.Report(
        eventType: .advInd, addressType: .randomDevice, address: BluetoothAddress(value: 0xC1_22_33_44_55_66),
        data: Array(repeating: 0xAB, count: 31), rssi: -60)])
    let frame = HCIPacket.event(report.packet).h4Bytes
    var checksum = 0
    let seconds = measure {
        for _ in 0..<count {
            guard case .event(let packet) = try? HCIPacket(h4: frame),
                  case .le(.advertisingReport(let decoded))? = try? HCIEvent(decoding: packet) else { fatalError("decode failed") }
            checksum &+= Int(decoded.reports[0].rssi)
        }
    }
    precondition(checksum == -60 &* count)
    return [
        Figure(name: "adv_report_decode_per_s", value: Double(count) / seconds, unit: "events/s",
               note: "H4 frame → HCIPacket → HCIEvent, 1 report of 31 bytes"),
        Figure(name: "adv_report_decode_1M_s", value: seconds * 1_000_000 / Double(count), unit: "s",
               note: "time to decode 1,000,000 such events"),
    ]
}

let arguments = Set(CommandLine.arguments.dropFirst())
let quick = arguments.contains("--quick")
let json = arguments.contains("--json")
if let unknown = arguments.subtracting(["--quick", "--json"]).first {
    FileHandle.standardError.write(Data("cbbench: unknown option \(unknown) (use --quick, --json)\n".utf8))
    exit(2)
}

#if DEBUG
FileHandle.standardError.write(Data("cbbench: this is a debug build; run `swift run -c release cbbench` for real figures\n".utf8))
#endif

var figures: [Figure] = []
figures += advertisingReportDecode(count: quick ? 200_000 : 1_000_000)

if json {
    let body = figures.map { "\"\($0.name)\": \(String(format: "%.6g", $0.value))" }.joined(separator: ", ")
    print("{\(body)}")
} else {
    print("workload".padding(toLength: 28, withPad: " ", startingAt: 0) + "figure".padding(toLength: 22, withPad: " ", startingAt: 0) + "what")
    for f in figures {
        let value = String(format: "%.4g %@", f.value, f.unit)
        print(f.name.padding(toLength: 28, withPad: " ", startingAt: 0) + value.padding(toLength: 22, withPad: " ", startingAt: 0) + f.note)
    }
}
