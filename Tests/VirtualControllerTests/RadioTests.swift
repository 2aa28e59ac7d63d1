import HCI
import Scheduling
import Testing
@testable import VirtualController

@Suite("Virtual radio: advertising and scanning")
struct AdvertisingScanningTests {
    static let adData: [UInt8] = [0x02, 0x01, 0x06, 0x05, 0x09, 0x45, 0x63, 0x68, 0x6F]  // flags, "Echo"
    static let scanResponse: [UInt8] = [0x03, 0x03, 0x0D, 0x18]  // 16-bit UUID 0x180D

    func advertise(_ host: RawHost, type: LESetAdvertisingParameters.AdvertisingType = .advInd, intervalUnits: UInt16 = 0x00A0) {
        #expect(host.status(LESetAdvertisingParameters(
            advertisingIntervalMin: intervalUnits, advertisingIntervalMax: intervalUnits, advertisingType: type,
            ownAddressType: .publicDevice, peerAddressType: .publicDevice, peerAddress: .zero,
            advertisingChannelMap: 0x07, advertisingFilterPolicy: .acceptAll)) == .success)
        #expect(host.status(LESetAdvertisingData(advertisingData: Self.adData)) == .success)
        #expect(host.status(LESetScanResponseData(scanResponseData: Self.scanResponse)) == .success)
        #expect(host.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
    }

    func scan(_ host: RawHost, active: Bool, filterDuplicates: Bool) {
        #expect(host.status(LESetScanParameters(leScanType: active ? .active : .passive, leScanInterval: 0x0010, leScanWindow: 0x0010,
                                                ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered)) == .success)
        #expect(host.status(LESetScanEnable(leScanEnable: true, filterDuplicates: filterDuplicates)) == .success)
    }

    func reports(_ host: RawHost) -> [LEAdvertisingReport.Report] {
        host.takeLEEvents().flatMap { e -> [LEAdvertisingReport.Report] in
            if case .advertisingReport(let r) = e { return r.reports }
            return []
        }
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func passiveScanSeesAdvertisingAtItsInterval(mode: AirTimeMode) {
        let d = TwoDevices(airTime: mode, distance: 2)
        advertise(d.b, intervalUnits: 0x00A0)  // 100 ms
        scan(d.a, active: false, filterDuplicates: false)
        let start = d.loop.now
        d.loop.run(for: .seconds(1))
        let seen = reports(d.a)
        // 100 ms + 0–10 ms advDelay: 9 or 10 events in a second; never a scan response.
        #expect((9...10).contains(seen.count), "saw \(seen.count)")
        #expect(seen.allSatisfy { $0.eventType == .advInd && $0.address == TwoDevices.addressB && $0.data == Self.adData })
        // Log-distance model: −59 dBm at 1 m, exponent 2 → −65 dBm at 2 m.
        #expect(seen.allSatisfy { $0.rssi == -65 })
        #expect(d.loop.now - start == .seconds(1))
    }

    @Test func duplicateFilterReportsOnce() {
        let d = TwoDevices()
        advertise(d.b)
        scan(d.a, active: false, filterDuplicates: true)
        d.loop.run(for: .seconds(3))
        #expect(reports(d.a).count == 1)
        // Re-enabling the scan resets the filter.
        #expect(d.a.status(LESetScanEnable(leScanEnable: false, filterDuplicates: true)) == .success)
        #expect(d.a.status(LESetScanEnable(leScanEnable: true, filterDuplicates: true)) == .success)
        d.loop.run(for: .seconds(1))
        #expect(reports(d.a).count == 1)
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func activeScanGetsScanResponse(mode: AirTimeMode) {
        let d = TwoDevices(airTime: mode)
        advertise(d.b)
        scan(d.a, active: true, filterDuplicates: true)
        d.loop.run(for: .seconds(1))
        let seen = reports(d.a)
        #expect(seen.map(\.eventType) == [.advInd, .scanRsp])
        #expect(seen.last?.data == Self.scanResponse)
    }

    @Test func nonConnectableAndScannableTypes() {
        let d = TwoDevices()
        advertise(d.b, type: .advNonconnInd)
        scan(d.a, active: true, filterDuplicates: true)
        d.loop.run(for: .seconds(1))
        // Non-scannable: no scan request, so no scan response.
        #expect(reports(d.a).map(\.eventType) == [.advNonconnInd])
    }

    @Test func outOfRangeHearsNothing() {
        let d = TwoDevices(distance: 1000)  // −119 dBm: below −100 dBm sensitivity
        advertise(d.b)
        scan(d.a, active: false, filterDuplicates: false)
        d.loop.run(for: .seconds(1))
        #expect(reports(d.a).isEmpty)
        d.b.controller.position = RadioPosition(x: 10)
        d.loop.run(for: .seconds(1))
        let heard = reports(d.a)
        #expect(!heard.isEmpty)
        #expect(heard.allSatisfy { $0.rssi == -79 })  // −59 − 20·log10(10)
    }

    @Test func filterAcceptListScanning() {
        let d = TwoDevices()
        advertise(d.b)
        #expect(d.a.status(LEAddDeviceToFilterAcceptList(addressType: .publicDevice, address: BluetoothAddress("C0:00:00:00:00:99")!)) == .success)
        #expect(d.a.status(LESetScanParameters(leScanType: .passive, leScanInterval: 0x10, leScanWindow: 0x10,
                                               ownAddressType: .publicDevice, scanningFilterPolicy: .basicFiltered)) == .success)
        #expect(d.a.status(LESetScanEnable(leScanEnable: true, filterDuplicates: false)) == .success)
        // In use while scanning with a filter: the list can't change.
        #expect(d.a.status(LEClearFilterAcceptList()) == .commandDisallowed)
        d.loop.run(for: .seconds(1))
        #expect(reports(d.a).isEmpty)
    }
}
