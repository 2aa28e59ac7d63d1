import ATT
import AssignedNumbers

/// What a `GATTClient` needs from its ATT bearer: `ATTBearer` is one; tests script one.
///
/// The client takes over the notification and indication handlers, and listens to the bearer
/// (`addListener`) for readiness to send and the close, beside whatever else listens (a server
/// on the same bearer, the link's owner).
public protocol GATTClientBearer: AnyObject {
    /// ATT_MTU now.
    var mtu: Int { get }
    /// False once the bearer closed.
    var isOpen: Bool { get }
    /// Sends a request (one outstanding at a time) and completes with its response.
    func request(_ pdu: ATTPDU, completion: @escaping (Result<ATTPDU, ATTBearerError>) -> Void)
    /// The Exchange MTU procedure; completes with the new ATT_MTU.
    func exchangeMTU(completion: @escaping (Result<Int, ATTBearerError>) -> Void)
    /// Sends a command now; false when the link cannot take it (listeners hear
    /// `attBearerIsReadyToSend()` when it can).
    func sendCommand(_ pdu: ATTPDU) -> Bool
    var onNotification: ((ATTHandle, [UInt8]) -> Void)? { get set }
    var onMultipleNotification: (([(handle: ATTHandle, value: [UInt8])]) -> Void)? { get set }
    /// Confirmed by the bearer when the handler returns.
    var onIndication: ((ATTHandle, [UInt8]) -> Void)? { get set }
    /// Adds a listener, held weakly.
    func addListener(_ listener: any ATTBearerListener)
}

extension ATTBearer: GATTClientBearer {}

/// A service found by discovery (Core spec Vol 3 Part G §4.4).
public struct DiscoveredService: Hashable, Sendable {
    public var uuid: BluetoothUUID
    /// From the service declaration to the service's last attribute.
    public var handles: ClosedRange<ATTHandle>
    public var isPrimary: Bool

    public init(uuid: BluetoothUUID, handles: ClosedRange<ATTHandle>, isPrimary: Bool = true) {
        self.uuid = uuid
        self.handles = handles
        self.isPrimary = isPrimary
    }
}

/// A service another service includes (§4.5.1), found through its include declaration.
public struct DiscoveredIncludedService: Hashable, Sendable {
    /// The include declaration in the including service.
    public var declarationHandle: ATTHandle
    public var uuid: BluetoothUUID
    /// The included service's range.
    public var handles: ClosedRange<ATTHandle>

    public init(declarationHandle: ATTHandle, uuid: BluetoothUUID, handles: ClosedRange<ATTHandle>) {
        self.declarationHandle = declarationHandle
        self.uuid = uuid
        self.handles = handles
    }
}

/// A characteristic found by discovery (§4.6): its declaration, value handle, and where its
/// descriptors end.
public struct DiscoveredCharacteristic: Hashable, Sendable {
    public var uuid: BluetoothUUID
    public var declarationHandle: ATTHandle
    public var valueHandle: ATTHandle
    public var properties: GATTCharacteristicProperties
    /// The last handle of the characteristic: the next declaration − 1, or the service's end.
    public var endHandle: ATTHandle

    public init(uuid: BluetoothUUID, declarationHandle: ATTHandle, valueHandle: ATTHandle,
                properties: GATTCharacteristicProperties, endHandle: ATTHandle) {
        self.uuid = uuid
        self.declarationHandle = declarationHandle
        self.valueHandle = valueHandle
        self.properties = properties
        self.endHandle = endHandle
    }

    /// Where its descriptors can be: after the value, up to `endHandle`. Nil when there is no room.
    public var descriptorHandles: ClosedRange<ATTHandle>? {
        guard let first = valueHandle.next, first <= endHandle else { return nil }
        return first...endHandle
    }
}

/// A characteristic descriptor found by discovery (§4.7.1).
public struct DiscoveredDescriptor: Hashable, Sendable {
    public var uuid: BluetoothUUID
    public var handle: ATTHandle

    public init(uuid: BluetoothUUID, handle: ATTHandle) {
        self.uuid = uuid
        self.handle = handle
    }
}

/// Why a GATT client procedure failed.
public enum GATTClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The server answered with an ATT error naming `handle`.
    case attributeError(ATTErrorCode, handle: ATTHandle)
    /// A request went unanswered for the ATT transaction timeout; the bearer is closed.
    case timeout
    /// The link went down (or was already down).
    case disconnected
    /// The server answered something that breaks the protocol.
    case protocolViolation(String)
    /// The procedure cannot be asked this way (too few handles, an offset past 0xFFFF, …).
    case invalidArgument(String)
    /// A prepared write came back different from what was sent; the queue was cancelled.
    case writeVerificationFailed(handle: ATTHandle, offset: UInt16)
    /// The characteristic offers neither notify nor indicate, or has no Client
    /// Characteristic Configuration descriptor.
    case notSubscribable(ATTHandle)
    /// `GATTClient.maximumQueuedProcedures` procedures are already waiting.
    case queueFull
    /// The link refused to send the request.
    case cannotSend
    /// The server asked for more security and the link's could not be raised.
    case securityFailed(ATTSecurityFailure)

    init(_ error: ATTBearerError) {
        switch error {
        case .errorResponse(let response): self = .attributeError(response.errorCode, handle: response.attributeHandle)
        case .timeout: self = .timeout
        case .disconnected, .bearerClosed: self = .disconnected
        case .protocolViolation(let what): self = .protocolViolation(what)
        case .mtuAlreadyExchanged: self = .invalidArgument("the ATT MTU was already exchanged")
        case .invalidRequest(let what): self = .invalidArgument(what)
        case .cannotSend: self = .cannotSend
        case .securityFailed(let failure): self = .securityFailed(failure)
        }
    }

    public var description: String {
        switch self {
        case .attributeError(let code, let handle): "the server answered \(code) for handle \(handle)"
        case .timeout: "the server did not answer within the ATT transaction timeout"
        case .disconnected: "the link is disconnected"
        case .protocolViolation(let what): "GATT protocol violation: \(what)"
        case .invalidArgument(let what): "invalid procedure: \(what)"
        case .writeVerificationFailed(let handle, let offset):
            "the prepared write of \(handle) at offset \(offset) came back altered; the write was cancelled"
        case .notSubscribable(let handle): "characteristic \(handle) cannot notify or indicate"
        case .securityFailed(let failure): "the link's security could not be raised: \(failure)"
        case .queueFull: "too many GATT procedures are waiting"
        case .cannotSend: "the link cannot send now"
        }
    }
}
