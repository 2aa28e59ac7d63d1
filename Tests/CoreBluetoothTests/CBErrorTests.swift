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

    static let cbMessages: [(CBError.Code, String)] = [
        (.unknown, "Unknown error."),
        (.invalidParameters, "The specified parameters are invalid."),
        (.invalidHandle, "The specified attribute handle is invalid."),
        (.notConnected, "The device is not connected."),
        (.outOfSpace, "The device has run out of space to complete the intended operation."),
        (.operationCancelled, "The operation was cancelled."),
        (.connectionTimeout, "The connection has timed out unexpectedly."),
        (.peripheralDisconnected, "The specified device has disconnected from us."),
        (.uuidNotAllowed, "The specified UUID is not allowed for this operation."),
        (.alreadyAdvertising, "The peripheral is already advertising."),
        (.connectionFailed, "The connection failed."),
        (.connectionLimitReached, "The device already has the maximum number of connections."),
        (.unknownDevice, "Unknown device."),
        (.operationNotSupported, "The operation is not supported."),
        (.peerRemovedPairingInformation, "Peer removed pairing information."),
        (.encryptionTimedOut, "The encryption timed out."),
        (.tooManyLEPairedDevices, "Too many LE devices are paired to this device"),
        (.leGattExceededBackgroundNotificationLimit, "The background notification limit has been exceeded."),
        (.leGattNearBackgroundNotificationLimit, "The background notification limit has nearly been reached."),
    ]

    static let attMessages: [(CBATTError.Code, String)] = [
        (.success, "The operation succeeded."),
        (.invalidHandle, "The handle is invalid."),
        (.readNotPermitted, "Reading is not permitted."),
        (.writeNotPermitted, "Writing is not permitted."),
        (.invalidPdu, "The command is invalid."),
        (.insufficientAuthentication, "Authentication is insufficient."),
        (.requestNotSupported, "The request is not supported."),
        (.invalidOffset, "The offset is invalid."),
        (.insufficientAuthorization, "Authorization is insufficient."),
        (.prepareQueueFull, "The prepare queue is full."),
        (.attributeNotFound, "The attribute could not be found."),
        (.attributeNotLong, "The attribute is not long."),
        (.insufficientEncryptionKeySize, "The encryption key size is insufficient."),
        (.invalidAttributeValueLength, "The value's length is invalid."),
        (.unlikelyError, "Unlikely error."),
        (.insufficientEncryption, "Encryption is insufficient."),
        (.unsupportedGroupType, "The group type is unsupported."),
        (.insufficientResources, "Resources are insufficient."),
    ]

    @Test func messageTablesCoverEveryCode() {
        #expect(Self.cbMessages.map(\.0.rawValue) == Array(0...18))
        #expect(Self.attMessages.map(\.0.rawValue) == Array(0x00...0x11))
    }

    @Test func cbErrorRoundTripsThroughNSErrorForEveryCode() {
        for (code, _) in Self.cbMessages {
            let ns = CBError(code, userInfo: ["k": code.rawValue]) as NSError
            #expect(ns.domain == CBErrorDomain)
            #expect(ns.code == code.rawValue)
            let back = ns as? CBError
            #expect(back?.code == code)
            #expect(back?.userInfo["k"] as? Int == code.rawValue)
            let viaError: any Error = ns
            #expect((viaError as? CBError)?.code == code)
            #expect((viaError as? CBATTError) == nil)
            let plain: any Error = NSError(domain: CBErrorDomain, code: code.rawValue)
            #expect((plain as? CBError)?.code == code)
            let anything: Any = plain
            #expect((anything as? CBError)?.code == code)
        }
    }

    @Test func attErrorRoundTripsThroughNSErrorForEveryCode() {
        for (code, _) in Self.attMessages {
            let ns = CBATTError(code, userInfo: ["k": code.rawValue]) as NSError
            #expect(ns.domain == CBATTErrorDomain)
            #expect(ns.code == code.rawValue)
            let back = ns as? CBATTError
            #expect(back?.code == code)
            #expect(back?.userInfo["k"] as? Int == code.rawValue)
            let viaError: any Error = ns
            #expect((viaError as? CBATTError)?.code == code)
            #expect((viaError as? CBError) == nil)
            let plain: any Error = NSError(domain: CBATTErrorDomain, code: code.rawValue)
            #expect((plain as? CBATTError)?.code == code)
        }
    }

    @Test func catchPatternsMatchBridgedNSErrors() {
        func caughtCB(_ error: any Error) -> String {
            do { throw error } catch CBError.connectionTimeout { return "timeout" } catch CBError.peripheralDisconnected {
                return "disconnected"
            } catch let error as CBError { return "cb \(error.code.rawValue)" } catch { return "other" }
        }
        #expect(caughtCB(CBError(.connectionTimeout) as NSError) == "timeout")
        #expect(caughtCB(NSError(domain: CBErrorDomain, code: 6)) == "timeout")
        #expect(caughtCB(NSError(domain: CBErrorDomain, code: 7, userInfo: ["x": 1])) == "disconnected")
        #expect(caughtCB(NSError(domain: CBErrorDomain, code: 10)) == "cb 10")
        #expect(caughtCB(NSError(domain: NSCocoaErrorDomain, code: 6)) == "other")
        #expect(caughtCB(NSError(domain: CBATTErrorDomain, code: 6)) == "other")

        func caughtATT(_ error: any Error) -> String {
            do { throw error } catch CBATTError.insufficientEncryption { return "encryption" } catch CBATTError.invalidHandle {
                return "handle"
            } catch let error as CBATTError { return "att \(error.code.rawValue)" } catch { return "other" }
        }
        #expect(caughtATT(CBATTError(.insufficientEncryption) as NSError) == "encryption")
        #expect(caughtATT(NSError(domain: CBATTErrorDomain, code: 0x01)) == "handle")
        #expect(caughtATT(NSError(domain: CBATTErrorDomain, code: 0x0D)) == "att 13")
        #expect(caughtATT(NSError(domain: CBErrorDomain, code: 0x0F)) == "other")
    }

    @Test func localizedDescriptionIsApplesMessageForEveryCode() {
        for (code, message) in Self.cbMessages {
            let error = CBError(code)
            #expect(error.localizedDescription == message)
            #expect((error as any Error).localizedDescription == message)
            #expect((error as NSError).localizedDescription == message)
            #expect((NSError(domain: CBErrorDomain, code: code.rawValue) as? CBError)?.localizedDescription == message)
            #expect(error.userInfo.isEmpty)
        }
        for (code, message) in Self.attMessages {
            let error = CBATTError(code)
            #expect(error.localizedDescription == message)
            #expect((error as any Error).localizedDescription == message)
            #expect((error as NSError).localizedDescription == message)
            #expect((NSError(domain: CBATTErrorDomain, code: code.rawValue) as? CBATTError)?.localizedDescription == message)
        }
    }

    @Test func givenDescriptionWins() {
        let error = CBError(.connectionFailed, userInfo: [NSLocalizedDescriptionKey: "mine"])
        #expect(error.localizedDescription == "mine")
        #expect((error as any Error).localizedDescription == "mine")
        #expect(((error as NSError) as? CBError)?.localizedDescription == "mine")
        let att = CBATTError(.readNotPermitted, userInfo: [NSLocalizedDescriptionKey: "no"])
        #expect((att as any Error).localizedDescription == "no")
    }

    @Test func otherDomainsAndUnknownCodesDoNotCast() {
        let cocoa: any Error = NSError(domain: NSCocoaErrorDomain, code: 6)
        #expect((cocoa as? CBError) == nil)
        #expect((cocoa as? CBATTError) == nil)
        let posix: any Error = NSError(domain: NSPOSIXErrorDomain, code: 1)
        #expect((posix as? CBError) == nil)
        // Codes the enums lack have no case to cast to.
        #expect((NSError(domain: CBErrorDomain, code: 99) as any Error as? CBError) == nil)
        #expect((NSError(domain: CBATTErrorDomain, code: 0x80) as any Error as? CBATTError) == nil)
        // A Swift error of another type does not become one either.
        struct Other: Error {}
        #expect((Other() as any Error as? CBError) == nil)
    }

    @Test func userInfoIsPreserved() {
        let underlying = NSError(domain: NSPOSIXErrorDomain, code: 5)
        let info: [String: Any] = ["number": 42, "text": "hi", NSUnderlyingErrorKey: underlying]
        let ns = CBError(.connectionFailed, userInfo: info) as NSError
        #expect(ns.userInfo["number"] as? Int == 42)
        #expect(ns.userInfo["text"] as? String == "hi")
        let back = ns as? CBError
        #expect(back?.userInfo["number"] as? Int == 42)
        #expect(back?.userInfo["text"] as? String == "hi")
        #expect((back?.userInfo[NSUnderlyingErrorKey] as? NSError)?.code == 5)
        let fromPlain = NSError(domain: CBATTErrorDomain, code: 0x02, userInfo: ["handle": 7]) as? CBATTError
        #expect(fromPlain?.code == .readNotPermitted)
        #expect(fromPlain?.userInfo["handle"] as? Int == 7)
        #expect(fromPlain?.localizedDescription == "Reading is not permitted.")
    }
}
