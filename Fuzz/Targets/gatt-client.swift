// The GATT client's response handling (Vol 3 Part G §4): a client on a real ATT bearer over a
// channel double, in the middle of discovery, long reads and writes, reliable writes and
// subscriptions, answered by whatever the input says the server sent (responses, errors,
// notifications, indications, stray requests), with time passing (transaction timeout).
import ATT
import ATTTesting
import AssignedNumbers
import GATT
import Scheduling

/// Starts procedure `which`; every completion must come exactly once (checked by the client
/// itself; here only counted).
func start(_ which: UInt8, on client: GATTClient, _ count: @escaping () -> Void) {
    let service = DiscoveredService(uuid: .genericAccessService, handles: 0x0001...0x0040)
    let characteristic = DiscoveredCharacteristic(uuid: .deviceName, declarationHandle: 0x0002, valueHandle: 0x0003,
                                                  properties: [.read, .notify, .indicate], endHandle: 0x0010)
    switch which % 16 {
    case 0: client.discoverPrimaryServices { _ in count() }
    case 1: client.discoverPrimaryServices(uuid: BluetoothUUID(uuid16: 0x180D)) { _ in count() }
    case 2: client.discoverIncludedServices(of: service) { _ in count() }
    case 3: client.discoverCharacteristics(of: service) { _ in count() }
    case 4: client.discoverDescriptors(of: characteristic) { _ in count() }
    case 5: client.readValue(of: 0x0003) { _ in count() }
    case 6: client.readValues(ofType: .deviceName) { _ in count() }
    case 7: client.readMultipleValues(of: [0x0003, 0x0005]) { _ in count() }
    case 8: client.readMultipleVariableValues(of: [0x0003, 0x0005]) { _ in count() }
    case 9: client.writeValue([1, 2, 3], to: 0x0003) { _ in count() }
    case 10: client.writeLongValue(Array(repeating: 7, count: 60), to: 0x0003) { _ in count() }
    case 11: client.reliableWrite([(0x0003, [1]), (0x0005, [2, 3])]) { _ in count() }
    case 12: client.subscribe(to: characteristic, onValue: { _ in }, completion: { _ in count() })
    case 13: client.unsubscribe(from: characteristic, clientConfiguration: 0x0004) { _ in count() }
    case 14: client.exchangeMTU { _ in count() }
    default: _ = client.writeWithoutResponse([1], to: 0x0003)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let loop = EventLoop(pacing: .manual)
    let channel = FakeATTChannel()
    let bearer = ATTBearer(channel: channel, loop: loop)
    let client = GATTClient(bearer: bearer)
    client.onServiceChanged = { _ in }
    client.onUnhandledValue = { _, _ in }
    client.serviceChangedHandle = 0x0003
    var completions = 0
    start(input.u8(), on: client) { completions += 1 }
    start(input.u8(), on: client) { completions += 1 }
    while !input.isEmpty {
        let op = input.u8()
        switch op & 7 {
        case 0, 1, 2, 3, 4:
            channel.onReceive?(input.record())
        case 5:
            start(op >> 3, on: client) { completions += 1 }
        case 6:
            loop.run(for: .seconds(Int64(op >> 3)))
        default:
            channel.queuedPDUs = Int(op >> 3)
            channel.onCanSendMore?()
        }
        channel.sent.removeAll(keepingCapacity: true)
    }
    loop.run(for: .seconds(60))
    channel.onClose?()
    loop.runUntilIdle()
    return 0
}
