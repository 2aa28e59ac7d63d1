import ArgumentParser
import Dispatch
import Foundation
import HCI
import HCIDriver
import HCITransport
import Scheduling
import VirtualController

/// Starts the controller a transport string names and prints what it says about itself; can
/// also scan. The first thing to try with a new adapter, board or virtual controller.
struct HCIInfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hci-info",
        abstract: "Initialise a controller over HCI, print its identity and buffers, and optionally scan.",
        discussion: """
            The controller is CB_TRANSPORT's (default: an in-process virtual controller) unless --transport names one.
            Example: cbtool hci-info --transport tcp:127.0.0.1:9001 --scan 2
            """
    )

    @Option(name: .long, help: "virtual | virtual:PATH | tcp:HOST:PORT | unix:PATH | serial:DEVICE[:BAUD] | hci:N (default: CB_TRANSPORT).")
    var transport: String?

    @Option(name: .long, help: "Scan (active, legacy commands) for this many seconds and print each report.")
    var scan: Double = 0

    func run() throws {
        let spec: TransportSpec
        do {
            spec = try transport.map(TransportSpec.init(parsing:)) ?? TransportSpec.fromEnvironment()
        } catch {
            throw ToolError("\(error)")
        }
        let loop = EventLoop(name: "host", pacing: .realTime)
        defer { loop.shutdown() }
        var hciTransport: HCITransport
        if case .virtual(let path?) = spec {
            // A controller of ours on the radio another process shares (`cbtool radio --listen`).
            let proxy: RadioProxy
            do {
                proxy = try RadioProxy(path: path, loop: loop)
                try proxy.waitUntilJoined()
            } catch {
                throw ToolError("virtual:\(path): \(error)")
            }
            let address = BluetoothAddress(value: 0xC0_00_00_00_00_00 | UInt64(proxy.client) << 16 | 1)
            hciTransport = VirtualController(radio: proxy, address: address).makeHostTransport()
        } else if spec.isVirtual {
            let radio = VirtualRadio(loop: loop)
            hciTransport = VirtualController(radio: radio, address: BluetoothAddress(value: 0xC0_00_00_00_00_01)).makeHostTransport()
        } else {
            do { hciTransport = try spec.makeExternalTransport() } catch { throw ToolError("\(spec): \(error)") }
        }
        hciTransport = try Snoop.wrapFromEnvironment(hciTransport)

        let printer = ReportPrinter()
        let driver = HCIDriver(transport: hciTransport, loop: loop)
        let started = Completion<Result<ControllerInfo, HCIError>>()
        loop.execute {
            driver.delegate = printer
            driver.start { started.finish($0) }
        }
        guard let result = started.wait(seconds: 15) else { throw ToolError("\(spec): the controller did not finish starting in 15 s") }
        let info: ControllerInfo
        do { info = try result.get() } catch { throw ToolError("\(spec): \(error)") }
        emit("controller \(spec)")
        emit("  address        \(info.address)")
        emit("  HCI version    0x\(String(info.hciVersion, radix: 16)) revision 0x\(String(info.hciSubversion, radix: 16)), "
             + "company 0x\(String(info.companyIdentifier, radix: 16))")
        emit("  ACL buffers    \(info.totalACLDataPackets) × \(info.aclDataPacketLength) bytes\(info.usesSharedBREDRBuffers ? " (shared with BR/EDR)" : "")")
        emit("  LE features    0x\(String(info.leFeatures.rawValue, radix: 16))")
        if let length = info.maxDataLength {
            emit("  data length    up to \(length.supportedMaxTXOctets) bytes out, \(length.supportedMaxRXOctets) in")
        }
        emit("  extended adv   \(info.supportsExtendedAdvertising ? "yes" : "no"), extended scan \(info.supportsExtendedScanning ? "yes" : "no")")

        if scan > 0 {
            let enabled = Completion<Result<StatusReturn, HCIError>>()
            loop.execute {
                driver.send(LESetScanParameters(leScanType: .active, leScanInterval: 0x0030, leScanWindow: 0x0030,
                                                ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered)) { _ in }
                driver.send(LESetScanEnable(leScanEnable: true, filterDuplicates: false)) { enabled.finish($0) }
            }
            guard let scanResult = enabled.wait(seconds: 10) else { throw ToolError("\(spec): LE Set Scan Enable got no answer") }
            if case .failure(let error) = scanResult { throw ToolError("\(spec): cannot scan: \(error)") }
            emit("scanning for \(scan) s")
            Thread.sleep(forTimeInterval: scan)
            let disabled = Completion<Result<StatusReturn, HCIError>>()
            loop.execute { driver.send(LESetScanEnable(leScanEnable: false, filterDuplicates: false)) { disabled.finish($0) } }
            _ = disabled.wait(seconds: 5)
            emit("\(printer.count.withLock { $0 }) advertising reports")
        }
        let stopped = Completion<Void>()
        loop.execute { driver.stop(); stopped.finish(()) }
        _ = stopped.wait(seconds: 5)
    }
}

/// Prints advertising reports, legacy or extended (some controllers answer a legacy scan with
/// extended reports).
final class ReportPrinter: HCIDriverDelegate, @unchecked Sendable {
    let count = Locked(0)

    func didReceiveEvent(_ event: HCIEvent) {
        switch event {
        case .le(.advertisingReport(let r)):
            for report in r.reports {
                count.withLock { $0 += 1 }
                emit("  \(report.address) \(report.eventType) RSSI \(report.rssi) data \(report.data.hexString)")
            }
        case .le(.extendedAdvertisingReport(let r)):
            for report in r.reports {
                count.withLock { $0 += 1 }
                emit("  \(report.address) extended 0x\(String(report.eventType.rawValue, radix: 16)) RSSI \(report.rssi) data \(report.data.hexString)")
            }
        default:
            break
        }
    }

    func didReceiveACL(handle: ConnectionHandle, pdu: [UInt8]) {}
}

/// A value another thread hands over once, waited for with a deadline.
final class Completion<T>: @unchecked Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private var value: T?

    func finish(_ value: T) {
        self.value = value
        semaphore.signal()
    }

    func wait(seconds: Double) -> T? {
        semaphore.wait(timeout: .now() + seconds) == .success ? value : nil
    }
}
