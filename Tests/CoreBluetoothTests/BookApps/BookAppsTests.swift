import CoreBluetooth
import Foundation
import Testing

/// The book's Echo and Remote LED apps, both sides on one virtual radio on virtual time
/// (book-apps.md §1.17–1.20). Only Apple's API, plus `CBVirtualRadio` to own the clock.
@Suite struct BookAppsTests {
    @Test func echoClientGetsItsMessageBackInTwentyByteChunks() {
        let radio = CBVirtualRadio(clock: .virtual)
        let (server, client) = CBVirtualRadio.withCurrent(radio) {
            (EchoServerPeripheral(queue: DispatchQueue(label: "echo-server")), EchoClient(queue: DispatchQueue(label: "echo-client")))
        }
        #expect(radio.run(until: { client.isReady }, timeout: .seconds(30)))
        #expect(server.isAdvertising)
        let message = "hello, this message is longer than one twenty-byte packet"
        client.send(message)
        let expected = Data((message + "\n\0").utf8)
        #expect(radio.run(until: { client.echoed.count >= expected.count }, timeout: .seconds(30)))
        #expect(client.echoed == expected)
        // Full 20-byte chunks and the rest, each written after the previous one's echo.
        let chunks = stride(from: 0, to: expected.count, by: 20).map { min(20, expected.count - $0) }
        #expect(server.received.map(\.count) == chunks)
        #expect(chunks.count == 3)
        #expect(client.events.first == "connecting to peripheral...")
        _ = server.peripheralManager
    }

    @Test func ledRemoteSwitchesOnlyOnConfirmation() {
        let radio = CBVirtualRadio(clock: .virtual)
        let (led, remote) = CBVirtualRadio.withCurrent(radio) {
            (RemoteLedPeripheral(queue: DispatchQueue(label: "led")), LedRemoteCentral(queue: DispatchQueue(label: "remote")))
        }
        // Connected, subscribed, and the LED turned on at once: confirmed as 01 01.
        #expect(radio.run(until: { remote.switchIsOn }, timeout: .seconds(30)))
        #expect(led.ledIsOn)
        #expect(remote.confirmed == [RemoteLedPeripheral.ledOn])
        remote.turnLed(on: false)
        // The switch has not moved yet: it waits for the confirmation.
        #expect(remote.switchIsOn)
        #expect(radio.run(until: { !remote.switchIsOn }, timeout: .seconds(10)))
        #expect(!led.ledIsOn)
        #expect(remote.confirmed == [RemoteLedPeripheral.ledOn, RemoteLedPeripheral.ledOff])
    }
}
