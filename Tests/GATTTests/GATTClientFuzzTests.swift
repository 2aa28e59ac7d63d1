import ATT
import AssignedNumbers
import GATT
import Scheduling
import Testing

/// Every procedure against a server answering random and mutated PDUs, with notifications
/// and indications thrown in: nothing crashes, nothing hangs (each procedure ends within a
/// bounded number of answers), and each completes exactly once.
@Suite("GATT client: fuzz")
struct GATTClientFuzzTests {
    /// A response for `request`: mostly its own opcode with random parameters, sometimes an
    /// Error Response with a random code, sometimes any bytes at all.
    static func randomAnswer(to request: ATTPDU, _ rng: inout SeededGenerator) -> [UInt8] {
        let parameters = (0..<Int.random(in: 0...22, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        switch Int.random(in: 0..<10, using: &rng) {
        case 0..<6:
            var answer = [request.expectedResponseOpcode?.rawValue ?? 0x01] + parameters
            // Mostly a plausible Length octet for list responses, so parsing gets past it.
            if answer.count > 1, Bool.random(using: &rng) { answer[1] = [4, 6, 7, 8, 20, 21][Int.random(in: 0..<6, using: &rng)] }
            return answer
        case 6..<9:
            return ATTPDU.errorResponse(.init(requestOpcode: request.opcode,
                                              attributeHandle: ATTHandle(UInt16.random(in: 0...0xFFFF, using: &rng)),
                                              errorCode: ATTErrorCode(UInt8.random(in: 0...0x13, using: &rng)))).encode()
        default:
            return [UInt8.random(in: 0...255, using: &rng)] + parameters
        }
    }

    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6, 7, 8])
    func randomAnswersNeverCrashOrHangAndEveryProcedureCompletesOnce(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        let bearer = ScriptedBearer()
        let client = GATTClient(bearer: bearer)
        client.onServiceChanged = { _ in }
        client.serviceChangedHandle = 0x0003
        let service = DiscoveredService(uuid: .genericAccessService, handles: 0x0001...0x0040)
        let characteristic = DiscoveredCharacteristic(uuid: .deviceName, declarationHandle: 0x0002, valueHandle: 0x0003,
                                                      properties: [.read, .notify, .indicate], endHandle: 0x0010)
        let completions = Box<[Int]>([])
        func done(_ id: Int) -> (Any) -> Void { { _ in completions.value.append(id) } }
        for round in 0..<20 {
            let base = round * 16
            client.discoverPrimaryServices { done(base + 0)($0) }
            client.discoverPrimaryServices(uuid: BluetoothUUID(uuid16: 0x180D)) { done(base + 1)($0) }
            client.discoverIncludedServices(of: service) { done(base + 2)($0) }
            client.discoverCharacteristics(of: service) { done(base + 3)($0) }
            client.discoverDescriptors(of: characteristic) { done(base + 4)($0) }
            client.readValue(of: 0x0003) { done(base + 5)($0) }
            client.readValues(ofType: .deviceName) { done(base + 6)($0) }
            client.readMultipleValues(of: [0x0003, 0x0005]) { done(base + 7)($0) }
            client.readMultipleVariableValues(of: [0x0003, 0x0005]) { done(base + 8)($0) }
            client.writeValue([1, 2, 3], to: 0x0003) { done(base + 9)($0) }
            client.writeLongValue(Array(repeating: 7, count: 60), to: 0x0003) { done(base + 10)($0) }
            client.reliableWrite([(0x0003, [1]), (0x0005, [2, 3])]) { done(base + 11)($0) }
            client.subscribe(to: characteristic, onValue: { _ in }, completion: { done(base + 12)($0) })
            client.unsubscribe(from: characteristic, clientConfiguration: 0x0004) { done(base + 13)($0) }
            client.exchangeMTU { done(base + 14)($0) }
            _ = client.writeWithoutResponse([1], to: 0x0003)
            completions.value.append(base + 15)
            var answers = 0
            while bearer.outstanding > 0 {
                answers += 1
                if answers > 2_000 { break }
                bearer.answer { Self.randomAnswer(to: $0, &rng) }
                let handle = ATTHandle(UInt16.random(in: 0...8, using: &rng))
                let value = (0..<Int.random(in: 0...6, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                if Bool.random(using: &rng) { bearer.onNotification?(handle, value) } else { bearer.onIndication?(handle, value) }
            }
            #expect(answers <= 2_000, "a procedure kept asking")
            #expect(client.pendingProcedures == 0)
        }
        #expect(completions.value.sorted() == Array(0..<(20 * 16)))
        #expect(client.closeError == nil)
    }
}

/// Keeps what completions report.
final class Box<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}
