import ATT
import AssignedNumbers
import ByteCoding
import GATT
import Testing

/// A bearer double for the client: records each request and command as bytes, and answers
/// the oldest request with the bytes the test gives (an Error Response becomes the bearer's
/// `.errorResponse` failure, as `ATTBearer` reports it).
final class ScriptedBearer: GATTClientBearer {
    var mtu = ATTMTU.leDefault
    var isOpen = true
    var onNotification: ((ATTHandle, [UInt8]) -> Void)?
    var onMultipleNotification: (([(handle: ATTHandle, value: [UInt8])]) -> Void)?
    var onIndication: ((ATTHandle, [UInt8]) -> Void)?
    private var listeners: [any ATTBearerListener] = []
    /// False makes `sendCommand` refuse, as a full link queue does.
    var acceptsCommands = true
    var commands: [[UInt8]] = []
    private var sent: [[UInt8]] = []
    private var pending: [(ATTPDU, (Result<ATTPDU, ATTBearerError>) -> Void)] = []
    /// Requests sent and not answered yet.
    var outstanding: Int { pending.count }

    func request(_ pdu: ATTPDU, completion: @escaping (Result<ATTPDU, ATTBearerError>) -> Void) {
        guard isOpen else { return completion(.failure(.disconnected)) }
        sent.append(pdu.encode())
        pending.append((pdu, completion))
    }

    func exchangeMTU(completion: @escaping (Result<Int, ATTBearerError>) -> Void) {
        request(.exchangeMTURequest(.init(clientRxMTU: 517))) { [self] result in
            completion(result.map { response in
                if case .exchangeMTUResponse(let r) = response { mtu = ATTMTU.negotiated(clientRxMTU: 517, serverRxMTU: r.serverRxMTU) }
                return mtu
            })
        }
    }

    func addListener(_ listener: any ATTBearerListener) { listeners.append(listener) }

    /// The link can take commands again.
    func becomeReadyToSend() { for listener in listeners { listener.attBearerIsReadyToSend() } }

    func sendCommand(_ pdu: ATTPDU) -> Bool {
        guard isOpen, acceptsCommands else { return false }
        commands.append(pdu.encode())
        return true
    }

    /// What was sent since the last call, as hex.
    func takeSent() -> [String] {
        defer { sent = [] }
        return sent.map(\.hexString)
    }

    /// The server answers the oldest outstanding request.
    func respond(_ hex: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard !pending.isEmpty else {
            Issue.record("no request to answer with \(hex)", sourceLocation: sourceLocation)
            return
        }
        let (_, completion) = pending.removeFirst()
        let pdu = try! ATTPDU(decoding: [UInt8](hex: hex)!)
        if case .errorResponse(let error) = pdu { completion(.failure(.errorResponse(error))) } else { completion(.success(pdu)) }
    }

    /// Answers the oldest outstanding request with whatever bytes `make` gives for it, judged
    /// as `ATTBearer` judges them: undecodable or not answering the request is a protocol
    /// violation, an Error Response fails it.
    func answer(_ make: (ATTPDU) -> [UInt8]) {
        guard !pending.isEmpty else { return }
        let (request, completion) = pending.removeFirst()
        _ = takeSent()
        guard let pdu = try? ATTPDU(decoding: make(request)) else { return completion(.failure(.protocolViolation("malformed"))) }
        switch pdu {
        case .errorResponse(let error): completion(.failure(.errorResponse(error)))
        case _ where pdu.opcode == request.expectedResponseOpcode: completion(.success(pdu))
        default: completion(.failure(.protocolViolation("mismatch")))
        }
    }

    /// Expects exactly `request` to have been sent since the last step, then answers it.
    func expect(_ request: String, _ response: String?, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(takeSent() == [request.replacingOccurrences(of: " ", with: "").lowercased()], sourceLocation: sourceLocation)
        if let response { respond(response, sourceLocation: sourceLocation) }
    }

    /// The link goes down: the outstanding request fails, then the owner hears it.
    func close(_ reason: ATTBearer.CloseReason = .disconnected) {
        isOpen = false
        let failing = pending
        pending = []
        for (_, completion) in failing { completion(.failure(reason == .transactionTimeout ? .timeout : .disconnected)) }
        for listener in listeners { listener.attBearerDidClose(reason) }
    }
}

/// Keeps the result a completion reports.
final class Outcome<T>: @unchecked Sendable {
    var result: Result<T, GATTClientError>?
    var completion: (Result<T, GATTClientError>) -> Void { { self.result = $0 } }
    var value: T? { try? result?.get() }
    var error: GATTClientError? {
        if case .failure(let e) = result { return e }
        return nil
    }
}

/// 0000FEED-1234-5678-9ABC-DEF012345678, and its 16 octets little-endian.
private let customUUID = BluetoothUUID("0000FEED-1234-5678-9ABC-DEF012345678")!
private let customUUIDHex = "78563412F0DEBC9A78563412EDFE0000"

private func bytes(_ range: Range<Int>) -> [UInt8] { range.map { UInt8(truncatingIfNeeded: $0) } }
private func hexOf(_ range: Range<Int>) -> String { bytes(range).hexString }

@Suite("GATT client procedures against a scripted bearer")
struct GATTClientTests {
    let bearer = ScriptedBearer()
    let client: GATTClient

    init() { client = GATTClient(bearer: bearer) }

    // MARK: Discovery

    @Test func discoverAllPrimaryServicesContinuesAfterTheLastGroupUntilAttributeNotFound() {
        let services = Outcome<[DiscoveredService]>()
        client.discoverPrimaryServices(completion: services.completion)
        // Read By Group Type Request (0x10), 0x0001–0xFFFF, «Primary Service» 0x2800.
        // Response (0x11), Length 6: 0x0001–0x0005 0x1800, 0x0006–0x0009 0x1801.
        bearer.expect("10 0100 ffff 0028", "11 06 0100 0500 0018 0600 0900 0118")
        // Length 20: 0x000A–0x0010 with a 128-bit UUID.
        bearer.expect("10 0a00 ffff 0028", "11 14 0a00 1000 " + customUUIDHex)
        // Error Response (0x01) to 0x10 at 0x0011: Attribute Not Found (0x0A).
        bearer.expect("10 1100 ffff 0028", "01 10 1100 0a")
        #expect(services.value == [
            DiscoveredService(uuid: .genericAccessService, handles: 0x0001...0x0005),
            DiscoveredService(uuid: .genericAttributeService, handles: 0x0006...0x0009),
            DiscoveredService(uuid: customUUID, handles: 0x000A...0x0010),
        ])
        #expect(bearer.takeSent().isEmpty && client.pendingProcedures == 0)
    }

    @Test func discoverAllPrimaryServicesStopsAtAGroupEndingAt0xFFFF() {
        let services = Outcome<[DiscoveredService]>()
        client.discoverPrimaryServices(completion: services.completion)
        bearer.expect("10 0100 ffff 0028", "11 06 0100 ffff 0d18")
        #expect(services.value == [DiscoveredService(uuid: BluetoothUUID(uuid16: 0x180D), handles: 0x0001...0xFFFF)])
        #expect(bearer.takeSent().isEmpty)
    }

    @Test func aServerThatDoesNotAdvanceIsAProtocolViolationNotALoop() {
        let services = Outcome<[DiscoveredService]>()
        client.discoverPrimaryServices(completion: services.completion)
        bearer.expect("10 0100 ffff 0028", "11 06 0100 0500 0018")
        // A group before the start of the range asked for.
        bearer.expect("10 0600 ffff 0028", "11 06 0100 0500 0018")
        guard case .protocolViolation? = services.error else {
            Issue.record("expected a protocol violation, got \(String(describing: services.result))")
            return
        }
        #expect(bearer.takeSent().isEmpty)
    }

    @Test func anErrorOtherThanAttributeNotFoundFailsTheDiscovery() {
        let services = Outcome<[DiscoveredService]>()
        client.discoverPrimaryServices(completion: services.completion)
        bearer.expect("10 0100 ffff 0028", "11 06 0100 0500 0018")
        // Insufficient Authentication (0x05) for 0x0006.
        bearer.expect("10 0600 ffff 0028", "01 10 0600 05")
        #expect(services.error == .attributeError(.insufficientAuthentication, handle: 0x0006))
    }

    @Test func discoverPrimaryServicesByUUIDUsesFindByTypeValue() {
        let services = Outcome<[DiscoveredService]>()
        client.discoverPrimaryServices(uuid: BluetoothUUID(uuid16: 0x180D), completion: services.completion)
        // Find By Type Value Request (0x06): 0x0001–0xFFFF, type 0x2800, value 0x180D.
        // Response (0x07): found 0x0010, group end 0x0015.
        bearer.expect("06 0100 ffff 0028 0d18", "07 1000 1500")
        bearer.expect("06 1600 ffff 0028 0d18", "01 06 1600 0a")
        #expect(services.value == [DiscoveredService(uuid: BluetoothUUID(uuid16: 0x180D), handles: 0x0010...0x0015)])

        // A 128-bit UUID goes as its 16 octets.
        let custom = Outcome<[DiscoveredService]>()
        client.discoverPrimaryServices(uuid: customUUID, completion: custom.completion)
        bearer.expect("06 0100 ffff 0028 " + customUUIDHex, "01 06 0100 0a")
        #expect(custom.value == [])
    }

    @Test func findIncludedServicesReadsThe128BitUUIDOfAnIncludeWithoutA16BitOne() {
        let includes = Outcome<[DiscoveredIncludedService]>()
        let service = DiscoveredService(uuid: BluetoothUUID(uuid16: 0x180D), handles: 0x0020...0x002F)
        client.discoverIncludedServices(of: service, completion: includes.completion)
        // Read By Type Request (0x08) over the service, «Include» 0x2802. Response (0x09),
        // Length 8: include 0x0021 → 0x0040–0x0045, UUID 0x180F.
        bearer.expect("08 2000 2f00 0228", "09 08 2100 4000 4500 0f18")
        // Length 6: include 0x0022 → 0x0050–0x0058, no UUID (a 128-bit one).
        bearer.expect("08 2200 2f00 0228", "09 06 2200 5000 5800")
        bearer.expect("08 2300 2f00 0228", "01 08 2300 0a")
        // Read Request (0x0A) of the included service's declaration: its 128-bit UUID.
        bearer.expect("0a 5000", "0b " + customUUIDHex)
        #expect(includes.value == [
            DiscoveredIncludedService(declarationHandle: 0x0021, uuid: BluetoothUUID(uuid16: 0x180F), handles: 0x0040...0x0045),
            DiscoveredIncludedService(declarationHandle: 0x0022, uuid: customUUID, handles: 0x0050...0x0058),
        ])
    }

    /// The script of a service 0x0001–0x000A holding three characteristics.
    private func scriptCharacteristics() {
        // Read By Type «Characteristic» 0x2803. Length 7: declaration 0x0002 (read, value
        // 0x0003, 0x2A00) and 0x0004 (read|write = 0x0A, value 0x0005, 0x2A01).
        bearer.expect("08 0100 0a00 0328", "09 07 0200 02 0300 002a 0400 0a 0500 012a")
        // Length 21: declaration 0x0006 (notify = 0x10, value 0x0007, a 128-bit UUID).
        bearer.expect("08 0500 0a00 0328", "09 15 0600 10 0700 " + customUUIDHex)
        bearer.expect("08 0700 0a00 0328", "01 08 0700 0a")
    }

    @Test func discoverAllCharacteristicsEndsEachAtTheNextDeclarationOrTheServiceEnd() {
        let characteristics = Outcome<[DiscoveredCharacteristic]>()
        let service = DiscoveredService(uuid: .genericAccessService, handles: 0x0001...0x000A)
        client.discoverCharacteristics(of: service, completion: characteristics.completion)
        scriptCharacteristics()
        #expect(characteristics.value == [
            DiscoveredCharacteristic(uuid: .deviceName, declarationHandle: 0x0002, valueHandle: 0x0003,
                                     properties: .read, endHandle: 0x0003),
            DiscoveredCharacteristic(uuid: .appearance, declarationHandle: 0x0004, valueHandle: 0x0005,
                                     properties: [.read, .write], endHandle: 0x0005),
            DiscoveredCharacteristic(uuid: customUUID, declarationHandle: 0x0006, valueHandle: 0x0007,
                                     properties: .notify, endHandle: 0x000A),
        ])
    }

    @Test func discoverCharacteristicsByUUIDKeepsTheEndHandleOfTheWholeDiscovery() {
        let characteristics = Outcome<[DiscoveredCharacteristic]>()
        let service = DiscoveredService(uuid: .genericAccessService, handles: 0x0001...0x000A)
        client.discoverCharacteristics(of: service, uuid: .appearance, completion: characteristics.completion)
        scriptCharacteristics()
        #expect(characteristics.value == [
            DiscoveredCharacteristic(uuid: .appearance, declarationHandle: 0x0004, valueHandle: 0x0005,
                                     properties: [.read, .write], endHandle: 0x0005),
        ])
    }

    @Test func discoverDescriptorsUsesFindInformationAfterTheValue() {
        let descriptors = Outcome<[DiscoveredDescriptor]>()
        let characteristic = DiscoveredCharacteristic(uuid: customUUID, declarationHandle: 0x0006, valueHandle: 0x0007,
                                                      properties: .notify, endHandle: 0x000A)
        client.discoverDescriptors(of: characteristic, completion: descriptors.completion)
        // Find Information Request (0x04) 0x0008–0x000A. Response (0x05), Format 0x01 (16-bit):
        // 0x0008 CCCD 0x2902, 0x0009 User Description 0x2901.
        bearer.expect("04 0800 0a00", "05 01 0800 0229 0900 0129")
        // Format 0x02 (128-bit): 0x000A. It is the last handle: no further request.
        bearer.expect("04 0a00 0a00", "05 02 0a00 " + customUUIDHex)
        #expect(descriptors.value == [
            DiscoveredDescriptor(uuid: .clientCharacteristicConfiguration, handle: 0x0008),
            DiscoveredDescriptor(uuid: .characteristicUserDescription, handle: 0x0009),
            DiscoveredDescriptor(uuid: customUUID, handle: 0x000A),
        ])
        #expect(bearer.takeSent().isEmpty)

        // No room after the value: no request at all.
        let none = Outcome<[DiscoveredDescriptor]>()
        var bare = characteristic
        bare.endHandle = 0x0007
        client.discoverDescriptors(of: bare, completion: none.completion)
        #expect(none.value == [] && bearer.takeSent().isEmpty)
    }

    // MARK: Reads

    @Test func longReadContinuesWithReadBlobWhilePartsFillTheMTUAndStopsOnAShortOne() {
        let value = Outcome<[UInt8]>()
        client.readValue(of: 0x0003, completion: value.completion)
        // MTU 23: a part of 22 octets may have more behind it.
        bearer.expect("0a 0300", "0b " + hexOf(0..<22))
        // Read Blob Request (0x0C) at offset 22 = 0x0016, then 44 = 0x002C.
        bearer.expect("0c 0300 1600", "0d " + hexOf(22..<44))
        bearer.expect("0c 0300 2c00", "0d " + hexOf(44..<50))
        #expect(value.value == bytes(0..<50))
        #expect(bearer.takeSent().isEmpty)
    }

    @Test func aShortReadResponseIsTheWholeValue() {
        let value = Outcome<[UInt8]>()
        client.readValue(of: 0x0003, completion: value.completion)
        bearer.expect("0a 0300", "0b 0102")
        #expect(value.value == [1, 2] && bearer.takeSent().isEmpty)
    }

    @Test func attributeNotLongOnTheFirstBlobEndsAValueOfExactlyMTUMinusOne() {
        let value = Outcome<[UInt8]>()
        client.readValue(of: 0x0003, completion: value.completion)
        bearer.expect("0a 0300", "0b " + hexOf(0..<22))
        // Error Response to 0x0C: Attribute Not Long (0x0B).
        bearer.expect("0c 0300 1600", "01 0c 0300 0b")
        #expect(value.value == bytes(0..<22))
    }

    @Test func invalidOffsetOrAnEmptyBlobAtTheEndEndsTheValue() {
        let invalidOffset = Outcome<[UInt8]>()
        client.readValue(of: 0x0003, completion: invalidOffset.completion)
        bearer.expect("0a 0300", "0b " + hexOf(0..<22))
        bearer.expect("0c 0300 1600", "0d " + hexOf(22..<44))
        // Invalid Offset (0x07) at 44: the value is 44 octets.
        bearer.expect("0c 0300 2c00", "01 0c 0300 07")
        #expect(invalidOffset.value == bytes(0..<44))

        let empty = Outcome<[UInt8]>()
        client.readValue(of: 0x0003, completion: empty.completion)
        bearer.expect("0a 0300", "0b " + hexOf(0..<22))
        bearer.expect("0c 0300 1600", "0d")
        #expect(empty.value == bytes(0..<22))
    }

    @Test func attributeNotLongAfterTheFirstBlobOrAnotherErrorFailsTheRead() {
        let late = Outcome<[UInt8]>()
        client.readValue(of: 0x0003, completion: late.completion)
        bearer.expect("0a 0300", "0b " + hexOf(0..<22))
        bearer.expect("0c 0300 1600", "0d " + hexOf(22..<44))
        bearer.expect("0c 0300 2c00", "01 0c 0300 0b")
        #expect(late.error == .attributeError(.attributeNotLong, handle: 0x0003))

        let refused = Outcome<[UInt8]>()
        client.readValue(of: 0x0003, completion: refused.completion)
        bearer.expect("0a 0300", "0b " + hexOf(0..<22))
        // Read Not Permitted (0x02).
        bearer.expect("0c 0300 1600", "01 0c 0300 02")
        #expect(refused.error == .attributeError(.readNotPermitted, handle: 0x0003))
    }

    @Test func readUsingCharacteristicUUIDPagesThroughReadByType() {
        let values = Outcome<[(handle: ATTHandle, value: [UInt8])]>()
        client.readValues(ofType: .deviceName, completion: values.completion)
        // Read By Type 0x2A00 over 0x0001–0xFFFF; Length 4: 0x0003 "AB".
        bearer.expect("08 0100 ffff 002a", "09 04 0300 4142")
        bearer.expect("08 0400 ffff 002a", "01 08 0400 0a")
        #expect(values.value?.map(\.handle) == [0x0003] && values.value?.map(\.value) == [[0x41, 0x42]])
    }

    @Test func readMultipleAndReadMultipleVariable() {
        let joined = Outcome<[UInt8]>()
        client.readMultipleValues(of: [0x0003, 0x0005], completion: joined.completion)
        // Read Multiple Request (0x0E), Response (0x0F) with the values concatenated.
        bearer.expect("0e 0300 0500", "0f 0102 03")
        #expect(joined.value == [1, 2, 3])

        let separate = Outcome<[[UInt8]]>()
        client.readMultipleVariableValues(of: [0x0003, 0x0005], completion: separate.completion)
        // Read Multiple Variable Request (0x20), Response (0x21): length 2 "0102", length 1 "03".
        bearer.expect("20 0300 0500", "21 0200 0102 0100 03")
        #expect(separate.value == [[1, 2], [3]])

        let one = Outcome<[UInt8]>()
        client.readMultipleValues(of: [0x0003], completion: one.completion)
        guard case .invalidArgument? = one.error else {
            Issue.record("one handle must be refused")
            return
        }
        #expect(bearer.takeSent().isEmpty)
    }

    // MARK: Writes

    @Test func aShortWriteIsOneWriteRequest() {
        let done = Outcome<Void>()
        client.writeValue([0x01, 0x02], to: 0x0003, completion: done.completion)
        // Write Request (0x12), Write Response (0x13).
        bearer.expect("12 0300 0102", "13")
        #expect(done.value != nil)
    }

    @Test func aLongWriteGoesInPreparedPartsOfMTUMinus5ThenExecutes() {
        let done = Outcome<Void>()
        // 40 octets at MTU 23: parts of 18 at offsets 0, 18 (0x12) and 36 (0x24).
        client.writeValue(bytes(0..<40), to: 0x0003, completion: done.completion)
        bearer.expect("16 0300 0000 " + hexOf(0..<18), "17 0300 0000 " + hexOf(0..<18))
        bearer.expect("16 0300 1200 " + hexOf(18..<36), "17 0300 1200 " + hexOf(18..<36))
        bearer.expect("16 0300 2400 " + hexOf(36..<40), "17 0300 2400 " + hexOf(36..<40))
        // Execute Write Request (0x18) flags 0x01, Response (0x19).
        bearer.expect("18 01", "19")
        #expect(done.value != nil && bearer.takeSent().isEmpty)
    }

    @Test func anAlteredEchoCancelsTheQueueAndFails() {
        let done = Outcome<Void>()
        client.writeLongValue(bytes(0..<40), to: 0x0003, completion: done.completion)
        bearer.expect("16 0300 0000 " + hexOf(0..<18), "17 0300 0000 " + hexOf(0..<18))
        // The server echoes a different last octet.
        bearer.expect("16 0300 1200 " + hexOf(18..<36), "17 0300 1200 " + hexOf(18..<35) + "ff")
        // Execute Write with flags 0x00: cancel.
        bearer.expect("18 00", "19")
        #expect(done.error == .writeVerificationFailed(handle: 0x0003, offset: 18))
        #expect(bearer.takeSent().isEmpty && client.pendingProcedures == 0)
    }

    @Test func aReliableWritePreparesEveryValueAndExecutesOnce() {
        let done = Outcome<Void>()
        client.reliableWrite([(0x0003, [0x01, 0x02]), (0x0005, [0x03])], completion: done.completion)
        bearer.expect("16 0300 0000 0102", "17 0300 0000 0102")
        bearer.expect("16 0500 0000 03", "17 0500 0000 03")
        bearer.expect("18 01", "19")
        #expect(done.value != nil)
    }

    @Test func aRefusedPreparedWriteCancelsTheQueueAndFailsWithTheError() {
        let done = Outcome<Void>()
        client.reliableWrite([(0x0003, [0x01, 0x02]), (0x0005, [0x03])], completion: done.completion)
        bearer.expect("16 0300 0000 0102", "17 0300 0000 0102")
        // Prepare Queue Full (0x09).
        bearer.expect("16 0500 0000 03", "01 16 0500 09")
        bearer.expect("18 00", "19")
        #expect(done.error == .attributeError(.prepareQueueFull, handle: 0x0005))
    }

    @Test func writeWithoutResponseReportsBackPressure() {
        // Write Command (0x52).
        #expect(client.writeWithoutResponse([0x01, 0x02], to: 0x0003))
        #expect(bearer.commands.map(\.hexString) == ["5203000102"])
        // Longer than ATT_MTU − 3: refused, but that says nothing about the link.
        #expect(!client.writeWithoutResponse(bytes(0..<21), to: 0x0003))
        #expect(client.canSendWriteWithoutResponse)

        var ready = 0
        client.onReadyToSendWriteWithoutResponse = { ready += 1 }
        bearer.acceptsCommands = false
        #expect(!client.writeWithoutResponse([0x03], to: 0x0003))
        #expect(!client.canSendWriteWithoutResponse)
        bearer.acceptsCommands = true
        bearer.becomeReadyToSend()
        #expect(ready == 1 && client.canSendWriteWithoutResponse)
        #expect(bearer.takeSent().isEmpty)
    }

    // MARK: Subscriptions

    @Test func subscribingFindsTheCCCDAndDeliversANotificationThatBeatsTheWriteResponse() {
        let characteristic = DiscoveredCharacteristic(uuid: customUUID, declarationHandle: 0x0010, valueHandle: 0x0011,
                                                      properties: [.notify, .indicate], endHandle: 0x0013)
        var values: [[UInt8]] = []
        let subscribed = Outcome<GATTClientConfiguration>()
        client.subscribe(to: characteristic, onValue: { values.append($0) }, completion: subscribed.completion)
        bearer.expect("04 1200 1300", "05 01 1200 0229 1300 0129")
        // Write Request to the CCCD: 0x0001, notifications (preferred when both are offered).
        bearer.expect("12 1200 0100", nil)
        bearer.onNotification?(0x0011, [0xAA])
        bearer.respond("13")
        #expect(subscribed.value == .notification)
        #expect(values == [[0xAA]])

        bearer.onMultipleNotification?([(0x0011, [0xBB]), (0x0011, [0xCC])])
        #expect(values == [[0xAA], [0xBB], [0xCC]])

        var unhandled: [ATTHandle] = []
        client.onUnhandledValue = { handle, _ in unhandled.append(handle) }
        let unsubscribed = Outcome<Void>()
        client.unsubscribe(from: characteristic, clientConfiguration: 0x0012, completion: unsubscribed.completion)
        bearer.expect("12 1200 0000", "13")
        #expect(unsubscribed.value != nil)
        bearer.onNotification?(0x0011, [0xDD])
        #expect(values.count == 3 && unhandled == [0x0011])
    }

    @Test func anIndicateOnlyCharacteristicIsSubscribedWithIndications() {
        let characteristic = DiscoveredCharacteristic(uuid: customUUID, declarationHandle: 0x0010, valueHandle: 0x0011,
                                                      properties: .indicate, endHandle: 0x0012)
        var values: [[UInt8]] = []
        let subscribed = Outcome<GATTClientConfiguration>()
        client.subscribe(to: characteristic, clientConfiguration: 0x0012, onValue: { values.append($0) },
                         completion: subscribed.completion)
        bearer.expect("12 1200 0200", "13")
        #expect(subscribed.value == .indication)
        bearer.onIndication?(0x0011, [0x01])
        #expect(values == [[0x01]])
    }

    @Test func aRefusedSubscriptionDropsItsHandlerAndOneWithoutNotifyOrCCCDFails() {
        let characteristic = DiscoveredCharacteristic(uuid: customUUID, declarationHandle: 0x0010, valueHandle: 0x0011,
                                                      properties: .notify, endHandle: 0x0012)
        var values: [[UInt8]] = []
        let refused = Outcome<GATTClientConfiguration>()
        client.subscribe(to: characteristic, clientConfiguration: 0x0012, onValue: { values.append($0) },
                         completion: refused.completion)
        // Write Not Permitted (0x03).
        bearer.expect("12 1200 0100", "01 12 1200 03")
        #expect(refused.error == .attributeError(.writeNotPermitted, handle: 0x0012))
        bearer.onNotification?(0x0011, [0x01])
        #expect(values.isEmpty)

        let readOnly = Outcome<GATTClientConfiguration>()
        var plain = characteristic
        plain.properties = .read
        client.subscribe(to: plain, onValue: { _ in }, completion: readOnly.completion)
        #expect(readOnly.error == .notSubscribable(0x0011) && bearer.takeSent().isEmpty)

        let noCCCD = Outcome<GATTClientConfiguration>()
        client.subscribe(to: characteristic, onValue: { _ in }, completion: noCCCD.completion)
        bearer.expect("04 1200 1200", "05 01 1200 0129")
        #expect(noCCCD.error == .notSubscribable(0x0011))
    }

    @Test func aServiceChangedIndicationReportsTheAffectedRange() {
        var changed: [ClosedRange<ATTHandle>] = []
        client.onServiceChanged = { changed.append($0) }
        let characteristics = Outcome<[DiscoveredCharacteristic]>()
        client.discoverCharacteristics(of: DiscoveredService(uuid: .genericAttributeService, handles: 0x0001...0x0005),
                                       completion: characteristics.completion)
        // Declaration 0x0002: indicate (0x20), value 0x0003, Service Changed 0x2A05.
        bearer.expect("08 0100 0500 0328", "09 07 0200 20 0300 052a")
        bearer.expect("08 0300 0500 0328", "01 08 0300 0a")
        #expect(client.serviceChangedHandle == 0x0003)
        // Affected: 0x0010–0xFFFF.
        bearer.onIndication?(0x0003, [0x10, 0x00, 0xFF, 0xFF])
        // Malformed (start after end, or short) values are ignored.
        bearer.onIndication?(0x0003, [0x10, 0x00, 0x01, 0x00])
        bearer.onIndication?(0x0003, [0x10])
        #expect(changed == [0x0010...0xFFFF])
    }

    // MARK: Queue, errors, disconnection

    @Test func proceduresRunOneAtATimeAndALongReadIsNotInterleaved() {
        let read = Outcome<[UInt8]>()
        let write = Outcome<Void>()
        client.readValue(of: 0x0003, completion: read.completion)
        client.writeValue([0x01], to: 0x0005, completion: write.completion)
        #expect(client.pendingProcedures == 2)
        bearer.expect("0a 0300", "0b " + hexOf(0..<22))
        // The blob comes before the queued write's request.
        bearer.expect("0c 0300 1600", "0d 01")
        #expect(read.value?.count == 23 && write.result == nil)
        bearer.expect("12 0500 01", "13")
        #expect(write.value != nil && client.pendingProcedures == 0)
    }

    @Test func theQueueIsBounded() {
        client.maximumQueuedProcedures = 2
        let outcomes = (0..<4).map { _ in Outcome<[UInt8]>() }
        for outcome in outcomes { client.readValue(of: 0x0003, completion: outcome.completion) }
        // One runs, two wait, the fourth is refused.
        #expect(outcomes[3].error == .queueFull)
        #expect(client.pendingProcedures == 3 && bearer.outstanding == 1)
    }

    @Test func aDisconnectionMidProcedureFailsItAndEveryWaitingOneAndLeavesNothingPending() {
        var closed: GATTClientError?
        client.onClose = { closed = $0 }
        let read = Outcome<[UInt8]>()
        let discovery = Outcome<[DiscoveredService]>()
        let write = Outcome<Void>()
        var values: [[UInt8]] = []
        let characteristic = DiscoveredCharacteristic(uuid: customUUID, declarationHandle: 0x0010, valueHandle: 0x0011,
                                                      properties: .notify, endHandle: 0x0012)
        let subscribed = Outcome<GATTClientConfiguration>()
        client.subscribe(to: characteristic, clientConfiguration: 0x0012, onValue: { values.append($0) },
                         completion: subscribed.completion)
        bearer.expect("12 1200 0100", "13")

        client.readValue(of: 0x0003, completion: read.completion)
        client.discoverPrimaryServices(completion: discovery.completion)
        client.writeValue([0x01], to: 0x0005, completion: write.completion)
        bearer.expect("0a 0300", "0b " + hexOf(0..<22))
        #expect(bearer.takeSent() == ["0c03001600"])
        bearer.close()

        #expect(read.error == .disconnected && discovery.error == .disconnected && write.error == .disconnected)
        #expect(closed == .disconnected)
        #expect(client.pendingProcedures == 0 && bearer.outstanding == 0 && bearer.takeSent().isEmpty)
        // Subscriptions are gone; later procedures fail at once.
        bearer.onNotification?(0x0011, [0x01])
        #expect(values.isEmpty)
        let late = Outcome<[UInt8]>()
        client.readValue(of: 0x0003, completion: late.completion)
        #expect(late.error == .disconnected && bearer.takeSent().isEmpty)
    }

    /// Starts procedure number `index` (each one the client has) with `done` as its completion.
    static func start(_ index: Int, on client: GATTClient, done: @escaping (GATTClientError?) -> Void) {
        func report<T>(_ result: Result<T, GATTClientError>) {
            if case .failure(let error) = result { done(error) } else { done(nil) }
        }
        let service = DiscoveredService(uuid: .genericAccessService, handles: 0x0001...0x0010)
        let characteristic = DiscoveredCharacteristic(uuid: .deviceName, declarationHandle: 0x0002, valueHandle: 0x0003,
                                                      properties: [.read, .notify], endHandle: 0x0005)
        switch index {
        case 0: client.discoverPrimaryServices(completion: report)
        case 1: client.discoverPrimaryServices(uuid: .genericAccessService, completion: report)
        case 2: client.discoverIncludedServices(of: service, completion: report)
        case 3: client.discoverCharacteristics(of: service, completion: report)
        case 4: client.discoverCharacteristics(of: service, uuid: .deviceName, completion: report)
        case 5: client.discoverDescriptors(of: characteristic, completion: report)
        case 6: client.readValue(of: 0x0003, completion: report)
        case 7: client.readValues(ofType: .deviceName, completion: report)
        case 8: client.readMultipleValues(of: [0x0003, 0x0005], completion: report)
        case 9: client.readMultipleVariableValues(of: [0x0003, 0x0005], completion: report)
        case 10: client.writeValue([0x01], to: 0x0003, completion: report)
        case 11: client.writeLongValue(Array(repeating: 1, count: 40), to: 0x0003, completion: report)
        case 12: client.reliableWrite([(0x0003, [0x01]), (0x0005, [0x02])], completion: report)
        case 13: client.subscribe(to: characteristic, onValue: { _ in }, completion: report)
        case 14: client.unsubscribe(from: characteristic, clientConfiguration: 0x0004, completion: report)
        default: client.exchangeMTU(completion: report)
        }
    }

    @Test(arguments: 0..<16)
    func aDisconnectionEndsEveryProcedureWithAnErrorAndFreesEverything(procedure: Int) {
        var outcomes: [GATTClientError?] = []
        Self.start(procedure, on: client) { outcomes.append($0) }
        // A second one waits behind it.
        Self.start(procedure, on: client) { outcomes.append($0) }
        #expect(bearer.outstanding == 1 && client.pendingProcedures == 2)
        bearer.close()
        #expect(outcomes == [.disconnected, .disconnected])
        #expect(bearer.outstanding == 0 && client.pendingProcedures == 0)
    }

    @Test func aTransactionTimeoutFailsTheRunningProcedureWithTimeout() {
        let discovery = Outcome<[DiscoveredService]>()
        let waiting = Outcome<Void>()
        client.discoverPrimaryServices(completion: discovery.completion)
        client.writeValue([0x01], to: 0x0005, completion: waiting.completion)
        bearer.expect("10 0100 ffff 0028", "11 06 0100 0500 0018")
        #expect(bearer.takeSent() == ["100600ffff0028"])
        bearer.close(.transactionTimeout)
        #expect(discovery.error == .timeout && waiting.error != nil)
        #expect(client.pendingProcedures == 0 && client.closeError == .timeout)
    }

    @Test func aDisconnectionDuringALongWriteFailsItWithoutACancel() {
        let done = Outcome<Void>()
        client.writeLongValue(bytes(0..<40), to: 0x0003, completion: done.completion)
        bearer.expect("16 0300 0000 " + hexOf(0..<18), "17 0300 0000 " + hexOf(0..<18))
        #expect(bearer.takeSent().count == 1)
        bearer.close()
        #expect(done.error == .disconnected && bearer.takeSent().isEmpty && client.pendingProcedures == 0)
    }

    @Test func exchangeMTUIsAQueuedProcedure() {
        let mtu = Outcome<Int>()
        client.exchangeMTU(completion: mtu.completion)
        // Exchange MTU Request (0x02) 517 = 0x0205; Response (0x03) 247 = 0x00F7.
        bearer.expect("02 0502", "03 f700")
        #expect(mtu.value == 247)
    }
}
