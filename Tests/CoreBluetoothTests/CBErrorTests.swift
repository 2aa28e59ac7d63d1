import CoreBluetooth
import Foundation
import Testing

@Suite struct CBErrorTests {
    @Test func domains() {
        #expect(CBErrorDomain == "CBErrorDomain")
        #expect(CBATTErrorDomain == "CBATTErrorDomain")
        #expect(CBError.errorDomain == CBErrorDomain)
        #expect(CBATTError.errorDomain == CBATTErrorDomain)
    }

    @Test func cbErrorCodes() {
        let all: [CBError.Code] = [
            .unknown, .invalidParameters, .invalidHandle, .notConnected, .outOfSpace, .operationCancelled,
            .connectionTimeout, .peripheralDisconnected, .uuidNotAllowed, .alreadyAdvertising, .connectionFailed,
            .connectionLimitReached, .unknownDevice, .operationNotSupported, .peerRemovedPairingInformation,
            .encryptionTimedOut, .tooManyLEPairedDevices, .leGattExceededBackgroundNotificationLimit,
            .leGattNearBackgroundNotificationLimit,
        ]
        #expect(all.map(\.rawValue) == Array(0...18))
        #expect(CBError.unknownDevice == .unknownDevice)
    }

    @Test func attErrorCodesAreTheWireCodes() {
        let all: [CBATTError.Code] = [
            .success, .invalidHandle, .readNotPermitted, .writeNotPermitted, .invalidPdu,
            .insufficientAuthentication, .requestNotSupported, .invalidOffset, .insufficientAuthorization,
            .prepareQueueFull, .attributeNotFound, .attributeNotLong, .insufficientEncryptionKeySize,
            .invalidAttributeValueLength, .unlikelyError, .insufficientEncryption, .unsupportedGroupType,
            .insufficientResources,
        ]
        #expect(all.map(\.rawValue) == Array(0x00...0x11))
        #expect(CBATTError.invalidOffset == CBATTError.Code.invalidOffset)
    }

    @Test func attErrorBridgesToNSError() {
        let error: any Error = CBATTError(.invalidHandle)
        let ns = error as NSError
        #expect(ns.domain == CBATTErrorDomain)
        #expect(ns.code == 0x01)
        #expect((error as? CBATTError)?.code == .invalidHandle)
        #expect(error as? CBError == nil)
    }

    @Test func cbErrorBridgesToNSError() {
        let error: any Error = CBError(.peripheralDisconnected, userInfo: [NSLocalizedDescriptionKey: "gone"])
        let ns = error as NSError
        #expect(ns.domain == CBErrorDomain)
        #expect(ns.code == 7)
        #expect(ns.userInfo[NSLocalizedDescriptionKey] as? String == "gone")
        #expect((error as? CBError)?.code == .peripheralDisconnected)
        #expect((error as? CBError)?.errorCode == 7)
    }

    @Test func catchPatterns() {
        func fail() throws { throw CBATTError(.insufficientEncryption) }
        var caught = false
        do { try fail() } catch CBATTError.insufficientEncryption { caught = true } catch {}
        #expect(caught)
        #expect(CBATTError(.readNotPermitted) == CBATTError(.readNotPermitted))
        #expect(CBError(.notConnected) != CBError(.connectionFailed))
    }
}
