import ATTTesting
import ByteCoding
import HCI
import L2CAP
import Scheduling
import Testing
@testable import ATT

/// Vol 3 Part C §10.3.2: a client refused for want of security raises it and retries, once.
@Suite("ATT bearer: raising security and retrying")
struct ATTBearerSecurityTests {
    @Test func aRequestRefusedForSecurityIsSentAgainOnceRaisedAndOthersWaitBehindIt() {
        let h = BearerHarness()
        let asked = Box<[ATTErrorCode]>([])
        let done = Box<((ATTBearerError?) -> Void)?>(nil)
        h.bearer.onInsufficientSecurity = { code, finish in
            asked.value.append(code.errorCode)
            done.value = finish
        }
        let first = Box<Result<ATTPDU, ATTBearerError>?>(nil)
        let second = Box<Result<ATTPDU, ATTBearerError>?>(nil)
        h.bearer.request(.readRequest(.init(attributeHandle: 0x0003))) { first.value = $0 }
        h.bearer.request(.readRequest(.init(attributeHandle: 0x0004))) { second.value = $0 }
        #expect(h.channel.takeSent() == ["0a0300"])
        // Insufficient Authentication (0x05): the owner is asked; nothing else goes out meanwhile.
        h.channel.deliver("01 0a 03 00 05")
        #expect(asked.value == [.insufficientAuthentication])
        #expect(first.value == nil)
        #expect(h.channel.takeSent() == [])
        done.value?(nil)
        // The same request again, before the one queued behind it.
        #expect(h.channel.takeSent() == ["0a0300"])
        h.channel.deliver("0b 2a")
        #expect(first.value == .success(.readResponse(.init(attributeValue: [0x2a]))))
        #expect(h.channel.takeSent() == ["0a0400"])
        #expect(second.value == nil)
    }

    @Test func aSecondRefusalAfterTheRetryIsTheResultAndTheOwnerIsAskedOnlyOnce() {
        let h = BearerHarness()
        let asked = Box(0)
        h.bearer.onInsufficientSecurity = { _, finish in
            asked.value += 1
            finish(nil)
        }
        let result = Box<Result<ATTPDU, ATTBearerError>?>(nil)
        h.bearer.request(.readRequest(.init(attributeHandle: 0x0003))) { result.value = $0 }
        h.channel.deliver("01 0a 03 00 0f")
        #expect(h.channel.takeSent() == ["0a0300", "0a0300"])
        h.channel.deliver("01 0a 03 00 0f")
        #expect(asked.value == 1)
        #expect(result.value == .failure(.errorResponse(.init(requestOpcode: .readRequest, attributeHandle: 0x0003,
                                                                errorCode: .insufficientEncryption))))
    }

    @Test func theOwnersFailureIsTheRequestsResult() {
        let h = BearerHarness()
        h.bearer.onInsufficientSecurity = { _, finish in finish(.securityFailed(.peerRemovedPairingInformation)) }
        let result = Box<Result<ATTPDU, ATTBearerError>?>(nil)
        h.bearer.request(.writeRequest(.init(attributeHandle: 0x0010, attributeValue: [1]))) { result.value = $0 }
        h.channel.deliver("01 12 10 00 05")
        #expect(result.value == .failure(.securityFailed(.peerRemovedPairingInformation)))
    }

    @Test func otherErrorsAndBearersWithoutAnOwnerHookPassStraightThrough() {
        let h = BearerHarness()
        let result = Box<Result<ATTPDU, ATTBearerError>?>(nil)
        h.bearer.request(.readRequest(.init(attributeHandle: 0x0003))) { result.value = $0 }
        h.channel.deliver("01 0a 03 00 05")
        #expect(result.value == .failure(.errorResponse(.init(requestOpcode: .readRequest, attributeHandle: 0x0003,
                                                                errorCode: .insufficientAuthentication))))
        let asked = Box(0)
        h.bearer.onInsufficientSecurity = { _, _ in asked.value += 1 }
        h.bearer.request(.readRequest(.init(attributeHandle: 0x0003))) { result.value = $0 }
        h.channel.deliver("01 0a 03 00 02")
        #expect(asked.value == 0)
    }

    @Test func aRequestHeldForSecurityFailsWhenTheLinkGoesDown() {
        let h = BearerHarness()
        let done = Box<((ATTBearerError?) -> Void)?>(nil)
        h.bearer.onInsufficientSecurity = { _, finish in done.value = finish }
        let result = Box<Result<ATTPDU, ATTBearerError>?>(nil)
        h.bearer.request(.readRequest(.init(attributeHandle: 0x0003))) { result.value = $0 }
        h.channel.deliver("01 0a 03 00 05")
        h.channel.onClose?()
        #expect(result.value == .failure(.disconnected))
        // A late answer from the owner changes nothing.
        done.value?(nil)
        #expect(h.channel.takeSent() == ["0a0300"])
    }
}
