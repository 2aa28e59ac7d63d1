import HCI

/// One advertisement or scan response as the host sees it, whether the controller reported it
/// in a legacy or an extended advertising report.
public struct AdvertisingReport: Hashable, Sendable {
    public var address: LEAddress
    /// dBm; nil when the controller could not measure it (127 on the wire).
    public var rssi: Int8?
    /// The advertising data (AD structures), whole even when the controller split it.
    public var data: [UInt8]
    public var isConnectable: Bool
    public var isScannable: Bool
    public var isDirected: Bool
    public var isScanResponse: Bool
    /// Sent with legacy advertising PDUs.
    public var isLegacy: Bool
    /// The advertiser's TX power from an extended report, if it gave one.
    public var txPower: Int8?

    public init(address: LEAddress, rssi: Int8?, data: [UInt8], isConnectable: Bool, isScannable: Bool,
                isDirected: Bool, isScanResponse: Bool, isLegacy: Bool, txPower: Int8? = nil) {
        self.address = address
        self.rssi = rssi
        self.data = data
        self.isConnectable = isConnectable
        self.isScannable = isScannable
        self.isDirected = isDirected
        self.isScanResponse = isScanResponse
        self.isLegacy = isLegacy
        self.txPower = txPower
    }

    init(legacy r: LEAdvertisingReport.Report) {
        let type = r.eventType
        self.init(address: LEAddress(r.addressType, r.address), rssi: r.rssi == 127 ? nil : r.rssi, data: r.data,
                  isConnectable: type == .advInd || type == .advDirectInd,
                  isScannable: type == .advInd || type == .advScanInd,
                  isDirected: type == .advDirectInd, isScanResponse: type == .scanRsp, isLegacy: true)
    }
}

/// Joins extended reports whose data the controller split (data status "more to come").
struct ExtendedReportAssembler {
    private var partial: [Key: [UInt8]] = [:]

    struct Key: Hashable {
        var address: BluetoothAddress
        var sid: UInt8
        var scanResponse: Bool
    }

    /// Returns the report once its data is complete (or truncated), nil while more is to come.
    mutating func add(_ r: LEExtendedAdvertisingReport.Report) -> AdvertisingReport? {
        let type = r.eventType
        let key = Key(address: r.address, sid: r.advertisingSID, scanResponse: type.contains(.scanResponse))
        // Most reports are whole: no lookup (a hash of the key) and no copy for them.
        var data = r.data
        if !partial.isEmpty, let earlier = partial.removeValue(forKey: key) { data = earlier + r.data }
        if type.dataStatus == .incompleteMoreToCome {
            // Bound what a misbehaving controller can make us hold (the spec's maximum is 1650).
            if data.count <= 1650 { partial[key] = data }
            return nil
        }
        // Anonymous advertisements (no address type) are reported with a random placeholder type.
        let addressType = r.addressType ?? .randomDevice
        return AdvertisingReport(
            address: LEAddress(addressType, r.address), rssi: r.rssi == 127 ? nil : r.rssi, data: data,
            isConnectable: type.contains(.connectable), isScannable: type.contains(.scannable),
            isDirected: type.contains(.directed), isScanResponse: type.contains(.scanResponse),
            isLegacy: type.contains(.legacy), txPower: r.txPower == 127 ? nil : r.txPower)
    }

    mutating func reset() { partial = [:] }
}
