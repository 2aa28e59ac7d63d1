import Dispatch
import Foundation
import HostStack

/// Options for `registerForConnectionEvents(options:)`.
public struct CBConnectionEventMatchingOption: Hashable, RawRepresentable, Sendable {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Match peripherals with these services (`[CBUUID]`).
    public static let serviceUUIDs = CBConnectionEventMatchingOption(rawValue: CBConnectionEventMatchingOptionServiceUUIDs)
    /// Match these peripherals (`[UUID]`).
    public static let peripheralUUIDs = CBConnectionEventMatchingOption(rawValue: CBConnectionEventMatchingOptionPeripheralUUIDs)
}

/// The local device as a central: scans for peripherals, connects to them.
open class CBCentralManager: CBManager, @unchecked Sendable {
    /// Features a central may support.
    public struct Feature: OptionSet, Sendable {
        public var rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        /// Extended advertising and connections on LE Coded and 2M PHYs.
        public static let extendedScanAndConnect = Feature(rawValue: 1 << 0)
    }

    private weak var delegateStorage: CBCentralManagerDelegate?

    /// Who hears about state, discoveries and connections (held weakly).
    public weak var delegate: CBCentralManagerDelegate? {
        get { synchronized { delegateStorage } }
        set { synchronized { delegateStorage = newValue } }
    }

    /// A central with no delegate, calling back on the main queue.
    public convenience init() {
        self.init(delegate: nil, queue: nil, options: nil)
    }

    /// A central calling `delegate` on `queue` (the main queue when nil).
    public convenience init(delegate: CBCentralManagerDelegate?, queue: DispatchQueue?) {
        self.init(delegate: delegate, queue: queue, options: nil)
    }

    /// A central calling `delegate` on `queue` (the main queue when nil), with init options
    /// (`CBCentralManagerOption…Key`, and the Linux extensions `CBManagerOptionLinux…Key`).
    public init(delegate: CBCentralManagerDelegate?, queue: DispatchQueue?, options: [String: Any]? = nil) {
        super.init(queue: queue, options: options)
        delegateStorage = delegate
        startDevice()
    }

    override func stateDidChange() {
        delegate?.centralManagerDidUpdateState(self)
    }

    /// Whether the central can use `features` (here: whether its controller can).
    open class func supports(_ features: Feature) -> Bool {
        features.isSubset(of: [.extendedScanAndConnect])
    }

    /// Whether a scan is running.
    public var isScanning: Bool { false }

    /// The peripherals with these identifiers that this device has seen (now or in earlier runs).
    open func retrievePeripherals(withIdentifiers identifiers: [UUID]) -> [CBPeripheral] { [] }

    /// The peripherals connected to this device that have any of these services.
    open func retrieveConnectedPeripherals(withServices serviceUUIDs: [CBUUID]) -> [CBPeripheral] { [] }

    /// Scans for peripherals advertising any of `serviceUUIDs` (all when nil); a new scan
    /// replaces the running one's services and options.
    open func scanForPeripherals(withServices serviceUUIDs: [CBUUID]?, options: [String: Any]? = nil) {
        guard requirePoweredOn("scanForPeripherals(withServices:options:)") else { return }
    }

    /// Stops scanning.
    open func stopScan() {
        guard requirePoweredOn("stopScan()") else { return }
    }

    /// Connects to `peripheral`: never times out; stays pending until the peripheral appears
    /// or `cancelPeripheralConnection(_:)`.
    open func connect(_ peripheral: CBPeripheral, options: [String: Any]? = nil) {
        guard requirePoweredOn("connect(_:options:)") else { return }
    }

    /// Disconnects from `peripheral`, or cancels a pending connection.
    open func cancelPeripheralConnection(_ peripheral: CBPeripheral) {
        guard requirePoweredOn("cancelPeripheralConnection(_:)") else { return }
    }

    /// Asks for connection events of matching peripherals.
    open func registerForConnectionEvents(options: [CBConnectionEventMatchingOption: Any]? = nil) {}
}
