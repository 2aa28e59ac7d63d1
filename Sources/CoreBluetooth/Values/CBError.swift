import Foundation

/// The domain of `CBError`s.
public let CBErrorDomain = "CBErrorDomain"

/// The domain of `CBATTError`s: ATT error codes as a peer sent them, or as a local
/// peripheral manager answers with.
public let CBATTErrorDomain = "CBATTErrorDomain"

/// A Core Bluetooth error. Bridges to `NSError` in `CBErrorDomain` with `code.rawValue`, and
/// back: an `NSError` in `CBErrorDomain` casts to `CBError` (`error as? CBError`,
/// `catch CBError.connectionTimeout`), keeping its user info.
public struct CBError: CustomNSError, Hashable, @unchecked Sendable {
    /// Core Bluetooth error codes.
    public enum Code: Int, Sendable, Hashable {
        /// An unknown error.
        case unknown = 0
        /// The parameters are invalid.
        case invalidParameters = 1
        /// The attribute handle is invalid.
        case invalidHandle = 2
        /// The device is not connected.
        case notConnected = 3
        /// The device has run out of space for the operation.
        case outOfSpace = 4
        /// The operation was cancelled.
        case operationCancelled = 5
        /// The connection timed out.
        case connectionTimeout = 6
        /// The peripheral disconnected.
        case peripheralDisconnected = 7
        /// The UUID is not allowed.
        case uuidNotAllowed = 8
        /// The peripheral is already advertising.
        case alreadyAdvertising = 9
        /// The connection failed.
        case connectionFailed = 10
        /// The device already has the maximum number of connections.
        case connectionLimitReached = 11
        /// The device is unknown.
        case unknownDevice = 12
        /// The operation is not supported.
        case operationNotSupported = 13
        /// The peer removed its pairing information.
        case peerRemovedPairingInformation = 14
        /// The encryption timed out.
        case encryptionTimedOut = 15
        /// The device has paired with the maximum number of LE devices.
        case tooManyLEPairedDevices = 16
        /// The background notification limit was exceeded.
        case leGattExceededBackgroundNotificationLimit = 17
        /// The background notification limit is near.
        case leGattNearBackgroundNotificationLimit = 18

        /// Apple's original, misspelled name for `unknownDevice`.
        @available(*, deprecated, renamed: "unknownDevice")
        public static var unkownDevice: Code { .unknownDevice }
    }

    /// `CBErrorDomain`.
    public static var errorDomain: String { CBErrorDomain }
    /// What went wrong.
    public let code: Code
    /// Extra information, as in `NSError.userInfo`: what the error was made with, or what
    /// the `NSError` it was cast from carried.
    public let userInfo: [String: Any]

    /// An error with `code` and optional user info.
    public init(_ code: Code, userInfo: [String: Any] = [:]) {
        self.code = code
        self.userInfo = userInfo
    }

    /// `code.rawValue`, the `NSError` code.
    public var errorCode: Int { code.rawValue }
    /// The bridged `NSError`'s user info: `userInfo`, with Apple's message for the code under
    /// `NSLocalizedDescriptionKey` unless `userInfo` has one, so that `localizedDescription`
    /// is Apple's message (swift-corelibs-foundation has no per-domain message table).
    public var errorUserInfo: [String: Any] {
        var info = userInfo
        if info[NSLocalizedDescriptionKey] == nil { info[NSLocalizedDescriptionKey] = code.message }
        return info
    }
    /// `userInfo[NSLocalizedDescriptionKey]`, else Apple's message for the code.
    public var localizedDescription: String { userInfo[NSLocalizedDescriptionKey] as? String ?? code.message }

    /// Errors are equal when their codes are.
    public static func == (a: CBError, b: CBError) -> Bool { a.code == b.code }
    /// Hashes the code, consistent with `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// Shorthand for `Code.unknown`, as on Apple's error type.
    public static var unknown: Code { .unknown }
    /// Shorthand for `Code.invalidParameters`, as on Apple's error type.
    public static var invalidParameters: Code { .invalidParameters }
    /// Shorthand for `Code.invalidHandle`, as on Apple's error type.
    public static var invalidHandle: Code { .invalidHandle }
    /// Shorthand for `Code.notConnected`, as on Apple's error type.
    public static var notConnected: Code { .notConnected }
    /// Shorthand for `Code.outOfSpace`, as on Apple's error type.
    public static var outOfSpace: Code { .outOfSpace }
    /// Shorthand for `Code.operationCancelled`, as on Apple's error type.
    public static var operationCancelled: Code { .operationCancelled }
    /// Shorthand for `Code.connectionTimeout`, as on Apple's error type.
    public static var connectionTimeout: Code { .connectionTimeout }
    /// Shorthand for `Code.peripheralDisconnected`, as on Apple's error type.
    public static var peripheralDisconnected: Code { .peripheralDisconnected }
    /// Shorthand for `Code.uuidNotAllowed`, as on Apple's error type.
    public static var uuidNotAllowed: Code { .uuidNotAllowed }
    /// Shorthand for `Code.alreadyAdvertising`, as on Apple's error type.
    public static var alreadyAdvertising: Code { .alreadyAdvertising }
    /// Shorthand for `Code.connectionFailed`, as on Apple's error type.
    public static var connectionFailed: Code { .connectionFailed }
    /// Shorthand for `Code.connectionLimitReached`, as on Apple's error type.
    public static var connectionLimitReached: Code { .connectionLimitReached }
    /// `Code.unknownDevice` under Apple's original, misspelled name.
    @available(*, deprecated, renamed: "unknownDevice")
    public static var unkownDevice: Code { .unknownDevice }
    /// Shorthand for `Code.unknownDevice`, as on Apple's error type.
    public static var unknownDevice: Code { .unknownDevice }
    /// Shorthand for `Code.operationNotSupported`, as on Apple's error type.
    public static var operationNotSupported: Code { .operationNotSupported }
    /// Shorthand for `Code.peerRemovedPairingInformation`, as on Apple's error type.
    public static var peerRemovedPairingInformation: Code { .peerRemovedPairingInformation }
    /// Shorthand for `Code.encryptionTimedOut`, as on Apple's error type.
    public static var encryptionTimedOut: Code { .encryptionTimedOut }
    /// Shorthand for `Code.tooManyLEPairedDevices`, as on Apple's error type.
    public static var tooManyLEPairedDevices: Code { .tooManyLEPairedDevices }
    /// Shorthand for `Code.leGattExceededBackgroundNotificationLimit`, as on Apple's error type.
    public static var leGattExceededBackgroundNotificationLimit: Code { .leGattExceededBackgroundNotificationLimit }
    /// Shorthand for `Code.leGattNearBackgroundNotificationLimit`, as on Apple's error type.
    public static var leGattNearBackgroundNotificationLimit: Code { .leGattNearBackgroundNotificationLimit }
}

/// An ATT error (Core spec Vol 3 Part F §3.4.1.1). Bridges to `NSError` in `CBATTErrorDomain`
/// with the ATT error code as `code`, and back: an `NSError` in `CBATTErrorDomain` with one of
/// `Code`'s values casts to `CBATTError`, keeping its user info.
public struct CBATTError: CustomNSError, Hashable, @unchecked Sendable {
    /// ATT error codes; the raw value is the code on the wire.
    public enum Code: Int, Sendable, Hashable {
        /// No error (the answer to a request that succeeded).
        case success = 0x00
        /// The attribute handle is invalid.
        case invalidHandle = 0x01
        /// The attribute cannot be read.
        case readNotPermitted = 0x02
        /// The attribute cannot be written.
        case writeNotPermitted = 0x03
        /// The PDU is invalid.
        case invalidPdu = 0x04
        /// Authentication is required.
        case insufficientAuthentication = 0x05
        /// The server does not support the request.
        case requestNotSupported = 0x06
        /// The offset is past the end of the value.
        case invalidOffset = 0x07
        /// Authorization is required.
        case insufficientAuthorization = 0x08
        /// Too many prepared writes are queued.
        case prepareQueueFull = 0x09
        /// No attribute was found in the handle range.
        case attributeNotFound = 0x0A
        /// The attribute cannot be read or written with Read Blob / Prepare Write.
        case attributeNotLong = 0x0B
        /// The encryption key is too short.
        case insufficientEncryptionKeySize = 0x0C
        /// The value's length is invalid.
        case invalidAttributeValueLength = 0x0D
        /// The request failed for an unlikely reason.
        case unlikelyError = 0x0E
        /// Encryption is required.
        case insufficientEncryption = 0x0F
        /// The attribute type is not a supported grouping attribute.
        case unsupportedGroupType = 0x10
        /// The server ran out of resources.
        case insufficientResources = 0x11
    }

    /// `CBATTErrorDomain`.
    public static var errorDomain: String { CBATTErrorDomain }
    /// The ATT error code.
    public let code: Code
    /// Extra information, as in `NSError.userInfo`: what the error was made with, or what
    /// the `NSError` it was cast from carried.
    public let userInfo: [String: Any]

    /// An error with `code` and optional user info.
    public init(_ code: Code, userInfo: [String: Any] = [:]) {
        self.code = code
        self.userInfo = userInfo
    }

    /// `code.rawValue`, the `NSError` code.
    public var errorCode: Int { code.rawValue }
    /// The bridged `NSError`'s user info: `userInfo`, with Apple's message for the code under
    /// `NSLocalizedDescriptionKey` unless `userInfo` has one, so that `localizedDescription`
    /// is Apple's message (swift-corelibs-foundation has no per-domain message table).
    public var errorUserInfo: [String: Any] {
        var info = userInfo
        if info[NSLocalizedDescriptionKey] == nil { info[NSLocalizedDescriptionKey] = code.message }
        return info
    }
    /// `userInfo[NSLocalizedDescriptionKey]`, else Apple's message for the code.
    public var localizedDescription: String { userInfo[NSLocalizedDescriptionKey] as? String ?? code.message }

    /// Errors are equal when their codes are.
    public static func == (a: CBATTError, b: CBATTError) -> Bool { a.code == b.code }
    /// Hashes the code, consistent with `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// Shorthand for `Code.success`, as on Apple's error type.
    public static var success: Code { .success }
    /// Shorthand for `Code.invalidHandle`, as on Apple's error type.
    public static var invalidHandle: Code { .invalidHandle }
    /// Shorthand for `Code.readNotPermitted`, as on Apple's error type.
    public static var readNotPermitted: Code { .readNotPermitted }
    /// Shorthand for `Code.writeNotPermitted`, as on Apple's error type.
    public static var writeNotPermitted: Code { .writeNotPermitted }
    /// Shorthand for `Code.invalidPdu`, as on Apple's error type.
    public static var invalidPdu: Code { .invalidPdu }
    /// Shorthand for `Code.insufficientAuthentication`, as on Apple's error type.
    public static var insufficientAuthentication: Code { .insufficientAuthentication }
    /// Shorthand for `Code.requestNotSupported`, as on Apple's error type.
    public static var requestNotSupported: Code { .requestNotSupported }
    /// Shorthand for `Code.invalidOffset`, as on Apple's error type.
    public static var invalidOffset: Code { .invalidOffset }
    /// Shorthand for `Code.insufficientAuthorization`, as on Apple's error type.
    public static var insufficientAuthorization: Code { .insufficientAuthorization }
    /// Shorthand for `Code.prepareQueueFull`, as on Apple's error type.
    public static var prepareQueueFull: Code { .prepareQueueFull }
    /// Shorthand for `Code.attributeNotFound`, as on Apple's error type.
    public static var attributeNotFound: Code { .attributeNotFound }
    /// Shorthand for `Code.attributeNotLong`, as on Apple's error type.
    public static var attributeNotLong: Code { .attributeNotLong }
    /// Shorthand for `Code.insufficientEncryptionKeySize`, as on Apple's error type.
    public static var insufficientEncryptionKeySize: Code { .insufficientEncryptionKeySize }
    /// Shorthand for `Code.invalidAttributeValueLength`, as on Apple's error type.
    public static var invalidAttributeValueLength: Code { .invalidAttributeValueLength }
    /// Shorthand for `Code.unlikelyError`, as on Apple's error type.
    public static var unlikelyError: Code { .unlikelyError }
    /// Shorthand for `Code.insufficientEncryption`, as on Apple's error type.
    public static var insufficientEncryption: Code { .insufficientEncryption }
    /// Shorthand for `Code.unsupportedGroupType`, as on Apple's error type.
    public static var unsupportedGroupType: Code { .unsupportedGroupType }
    /// Shorthand for `Code.insufficientResources`, as on Apple's error type.
    public static var insufficientResources: Code { .insufficientResources }
}

extension CBError.Code {
    /// Lets `catch CBError.connectionTimeout` match a thrown `CBError` by its code.
    public static func ~= (match: CBError.Code, error: any Error) -> Bool {
        (error as? CBError)?.code == match
    }
}

extension CBATTError.Code {
    /// Lets `catch CBATTError.invalidHandle` match a thrown `CBATTError` by its code.
    public static func ~= (match: CBATTError.Code, error: any Error) -> Bool {
        (error as? CBATTError)?.code == match
    }
}

extension CBError.Code {
    /// Apple's English message for the code: `localizedDescription` of an error without one.
    var message: String {
        switch self {
        case .unknown: "Unknown error."
        case .invalidParameters: "The specified parameters are invalid."
        case .invalidHandle: "The specified attribute handle is invalid."
        case .notConnected: "The device is not connected."
        case .outOfSpace: "The device has run out of space to complete the intended operation."
        case .operationCancelled: "The operation was cancelled."
        case .connectionTimeout: "The connection has timed out unexpectedly."
        case .peripheralDisconnected: "The specified device has disconnected from us."
        case .uuidNotAllowed: "The specified UUID is not allowed for this operation."
        case .alreadyAdvertising: "The peripheral is already advertising."
        case .connectionFailed: "The connection failed."
        case .connectionLimitReached: "The device already has the maximum number of connections."
        case .unknownDevice: "Unknown device."
        case .operationNotSupported: "The operation is not supported."
        case .peerRemovedPairingInformation: "Peer removed pairing information."
        case .encryptionTimedOut: "The encryption timed out."
        case .tooManyLEPairedDevices: "Too many LE devices are paired to this device"
        case .leGattExceededBackgroundNotificationLimit: "The background notification limit has been exceeded."
        case .leGattNearBackgroundNotificationLimit: "The background notification limit has nearly been reached."
        }
    }
}

extension CBATTError.Code {
    /// Apple's English message for the code: `localizedDescription` of an error without one.
    var message: String {
        switch self {
        case .success: "The operation succeeded."
        case .invalidHandle: "The handle is invalid."
        case .readNotPermitted: "Reading is not permitted."
        case .writeNotPermitted: "Writing is not permitted."
        case .invalidPdu: "The command is invalid."
        case .insufficientAuthentication: "Authentication is insufficient."
        case .requestNotSupported: "The request is not supported."
        case .invalidOffset: "The offset is invalid."
        case .insufficientAuthorization: "Authorization is insufficient."
        case .prepareQueueFull: "The prepare queue is full."
        case .attributeNotFound: "The attribute could not be found."
        case .attributeNotLong: "The attribute is not long."
        case .insufficientEncryptionKeySize: "The encryption key size is insufficient."
        case .invalidAttributeValueLength: "The value's length is invalid."
        case .unlikelyError: "Unlikely error."
        case .insufficientEncryption: "Encryption is insufficient."
        case .unsupportedGroupType: "The group type is unsupported."
        case .insufficientResources: "Resources are insufficient."
        }
    }
}

// Bridging back from NSError. Apple's CBError and CBATTError are `_BridgedStoredNSError`s, which
// the Objective-C runtime casts from NSError; without Objective-C interop the Swift runtime
// only consults `_ObjectiveCBridgeable` (the protocol that bridges String and NSString in
// swift-corelibs-foundation), so both types bridge to and from NSError through it. The cast
// succeeds for an NSError of the type's domain whose code is one of `Code`'s values.

/// The bridge both error types share: an error of this type for an `NSError` in its domain
/// whose code its `Code` has.
protocol NSErrorBridgedCodes: CustomNSError {
    /// The error for an `NSError` code of this domain; nil when `Code` has no such value.
    init?(bridgedCode: Int, userInfo: [String: Any])
    /// What an absent `NSError` becomes.
    static var fallback: Self { get }
}

extension NSErrorBridgedCodes {
    /// An `NSError` in the type's domain with `errorCode` and `errorUserInfo`.
    var bridgedNSError: NSError { NSError(domain: Self.errorDomain, code: errorCode, userInfo: errorUserInfo) }

    /// The error for `source` when it is in the type's domain with a known code.
    static func bridged(from source: NSError) -> Self? {
        source.domain == errorDomain ? Self(bridgedCode: source.code, userInfo: source.userInfo) : nil
    }

    /// The error for `source`; traps unless it is in the type's domain with a known code.
    static func forceBridged(from source: NSError) -> Self {
        guard let error = bridged(from: source) else { preconditionFailure("\(source) is not a \(Self.self)") }
        return error
    }
}

extension CBError: NSErrorBridgedCodes {
    init?(bridgedCode: Int, userInfo: [String: Any]) {
        guard let code = Code(rawValue: bridgedCode) else { return nil }
        self.init(code, userInfo: userInfo)
    }
    static var fallback: CBError { CBError(.unknown) }
}

extension CBATTError: NSErrorBridgedCodes {
    init?(bridgedCode: Int, userInfo: [String: Any]) {
        guard let code = Code(rawValue: bridgedCode) else { return nil }
        self.init(code, userInfo: userInfo)
    }
    static var fallback: CBATTError { CBATTError(.unlikelyError) }
}

// The conformances below are the runtime's entry points; the work is `NSErrorBridgedCodes`'s.

extension CBError: _ObjectiveCBridgeable {
    public func _bridgeToObjectiveC() -> NSError { bridgedNSError }

    public static func _forceBridgeFromObjectiveC(_ source: NSError, result: inout CBError?) {
        result = forceBridged(from: source)
    }

    public static func _conditionallyBridgeFromObjectiveC(_ source: NSError, result: inout CBError?) -> Bool {
        result = bridged(from: source)
        return result != nil
    }

    public static func _unconditionallyBridgeFromObjectiveC(_ source: NSError?) -> CBError {
        source.map(forceBridged(from:)) ?? fallback
    }
}

extension CBATTError: _ObjectiveCBridgeable {
    public func _bridgeToObjectiveC() -> NSError { bridgedNSError }

    public static func _forceBridgeFromObjectiveC(_ source: NSError, result: inout CBATTError?) {
        result = forceBridged(from: source)
    }

    public static func _conditionallyBridgeFromObjectiveC(_ source: NSError, result: inout CBATTError?) -> Bool {
        result = bridged(from: source)
        return result != nil
    }

    public static func _unconditionallyBridgeFromObjectiveC(_ source: NSError?) -> CBATTError {
        source.map(forceBridged(from:)) ?? fallback
    }
}
