import CoreBluetooth
import ExampleApps
import Foundation
import Testing

/// `swift run ReadCharacteristic`, `WriteCharacteristic`, `Notifications` and `Streaming`
/// (book-apps.md §1.8–1.14), both sides on a virtual radio; the 5-second timers fired by hand.
@Suite struct CharacteristicTests {
    @Test func readGetsThePeripheralsCurrentTextEachTime() {
        let radio = CBVirtualRadio(clock: .virtual)
        let (peripheralTimers, centralTimers) = (ManualTimers(), ManualTimers())
        let (peripheral, central) = CBVirtualRadio.withCurrent(radio) {
            (RandomTextPeripheral(queue: DispatchQueue(label: "peripheral"), timers: peripheralTimers),
             ReadCentral(reads: 3, queue: DispatchQueue(label: "central"), timers: centralTimers))
        }
        // The first read as soon as the characteristic is found.
        #expect(radio.run(until: { central.values.count == 1 }, timeout: .seconds(10)))
        var expected = [peripheral.currentText]
        #expect(central.values == expected)
        #expect(peripheralTimers.intervals == [5])
        #expect(centralTimers.intervals == [5])
        for count in 2...3 {
            radio.run(for: .seconds(5))
            peripheralTimers.fire()  // new random text
            centralTimers.fire()     // the next read
            expected.append(peripheral.currentText)
            #expect(radio.run(until: { central.values.count == count }, timeout: .seconds(10)))
        }
        #expect(central.values == expected)
        #expect(radio.run(until: { central.isDone }, timeout: .seconds(10)))
        #expect(central.failure == nil)
        #expect(centralTimers.active == 0)
        #expect(central.log.all.filter { $0 == "pressed button" }.count == 3)
        #expect(expected.allSatisfy { $0.count <= 18 && $0.allSatisfy { $0.isLetter || $0.isNumber } })
    }

    @Test func writeSendsHelloAndThePeripheralLogsItInHex() {
        let radio = CBVirtualRadio(clock: .virtual)
        let long = "a message longer than twenty bytes"
        let (peripheral, central) = CBVirtualRadio.withCurrent(radio) {
            (WriteLoggerPeripheral(queue: DispatchQueue(label: "peripheral")),
             WriteCentral(messages: ["Hello", long], queue: DispatchQueue(label: "central")))
        }
        #expect(radio.run(until: { central.isDone }, timeout: .seconds(10)))
        #expect(central.failure == nil)
        #expect(peripheral.log.contains("48656c6c6f"))
        // Cut to 20 bytes, as the book's central does.
        #expect(peripheral.written == [Data("Hello".utf8), Data(long.utf8.prefix(20))])
        #expect(central.written == peripheral.written)
        #expect(central.log.all.filter { $0 == "data written" }.count == 2)
    }

    @Test func writeRefusesACharacteristicThatIsNotWritable() {
        // The ch. 7 peripheral's 2A56 is read + notify only.
        let radio = CBVirtualRadio(clock: .virtual)
        let (peripheral, central) = CBVirtualRadio.withCurrent(radio) {
            (RandomTextPeripheral(queue: DispatchQueue(label: "peripheral"), timers: ManualTimers()),
             WriteCentral(queue: DispatchQueue(label: "central")))
        }
        #expect(radio.run(until: { central.isDone }, timeout: .seconds(10)))
        #expect(central.failure == "2A56 is not writable")
        #expect(central.written.isEmpty)
        #expect(peripheral.isAdvertising)
    }

    @Test func notificationsBringEachNewTextThenUnsubscribe() {
        let radio = CBVirtualRadio(clock: .virtual)
        let timers = ManualTimers()
        let (peripheral, central) = CBVirtualRadio.withCurrent(radio) {
            (RandomTextPeripheral(queue: DispatchQueue(label: "peripheral"), timers: timers),
             NotifyCentral(count: 3, queue: DispatchQueue(label: "central")))
        }
        #expect(radio.run(until: { central.isSubscribed && peripheral.subscriberCount == 1 }, timeout: .seconds(10)))
        var expected: [String] = []
        for count in 1...3 {
            radio.run(for: .seconds(5))
            timers.fire()
            expected.append(peripheral.currentText)
            #expect(radio.run(until: { central.values.count == count }, timeout: .seconds(10)))
        }
        #expect(central.values == expected)
        #expect(radio.run(until: { central.isDone }, timeout: .seconds(10)))
        #expect(central.failure == nil)
        #expect(central.log.all.contains("New state: true") && central.log.all.contains("New state: false"))
        // The peripheral hears the unsubscription on its own queue, maybe after the central is done.
        #expect(radio.run(until: { peripheral.subscriberCount == 0 && peripheral.log.contains("unsubscribed") }, timeout: .seconds(10)))
    }

    @Test func streamingSendsTwentyByteChunksEachAfterReady() {
        let radio = CBVirtualRadio(clock: .virtual)
        let message = "This message is forty-five characters long..."
        #expect(message.utf8.count == 45)
        let (peripheral, central) = CBVirtualRadio.withCurrent(radio) {
            (FlowControlPeripheral(queue: DispatchQueue(label: "peripheral")),
             StreamingCentral(message: message, queue: DispatchQueue(label: "central")))
        }
        #expect(radio.run(until: { central.isDone }, timeout: .seconds(10)))
        #expect(central.failure == nil)
        #expect(central.isComplete)
        // 45 characters + NUL: 20 + 20 + 6, the peripheral answering each with "ready".
        #expect(central.sent.map(\.count) == [20, 20, 6])
        #expect(peripheral.chunks == central.sent)
        #expect(peripheral.messages == [message])
        #expect(central.log.all.filter { $0.hasPrefix("writing partial value") }
            == ["writing partial value: (0-19)", "writing partial value: (20-39)", "writing partial value: (40-45)"])
        #expect(central.log.contains("value write complete"))
    }

    @Test func streamingHelloIsOneSixByteWrite() {
        let radio = CBVirtualRadio(clock: .virtual)
        let (peripheral, central) = CBVirtualRadio.withCurrent(radio) {
            (FlowControlPeripheral(queue: DispatchQueue(label: "peripheral")),
             StreamingCentral(message: "Hello", queue: DispatchQueue(label: "central")))
        }
        #expect(radio.run(until: { central.isDone }, timeout: .seconds(10)))
        #expect(peripheral.chunks == [Data([0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00])])
        #expect(peripheral.log.contains("received 6 bytes: 48656c6c6f00"))
        #expect(peripheral.messages == ["Hello"])
    }
}
