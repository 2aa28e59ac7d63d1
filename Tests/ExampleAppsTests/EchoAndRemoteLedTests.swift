import CoreBluetooth
import ExampleApps
import Foundation
import Testing

/// The book's Echo and Remote LED apps (book-apps.md §1.17–1.20), both sides on one virtual
/// radio on virtual time: `swift run EchoServer` / `EchoClient`, `RemoteLed` / `LedRemote`.
@Suite struct EchoAndRemoteLedTests {
    @Test func echoClientGetsItsMessageBackInTwentyByteChunks() {
        let radio = CBVirtualRadio(clock: .virtual)
        let message = "hello, this message is longer than one twenty-byte packet"
        let (server, client) = CBVirtualRadio.withCurrent(radio) {
            (EchoServerPeripheral(queue: DispatchQueue(label: "echo-server"), position: [1, 0]),
             EchoClientCentral(message: message, queue: DispatchQueue(label: "echo-client")))
        }
        #expect(radio.run(until: { client.isDone }, timeout: .seconds(30)))
        #expect(server.isAdvertising)
        let expected = Data((message + "\n\0").utf8)
        #expect(client.echoed == expected)
        // Full 20-byte chunks and the rest, each written after the previous one's echo.
        let chunks = stride(from: 0, to: expected.count, by: 20).map { min(20, expected.count - $0) }
        #expect(server.received.map(\.count) == chunks)
        #expect(chunks.count == 3)
        #expect(client.log.all.first == "connecting to peripheral...")
    }

    @Test func echoClientSendsMoreOnceReady() {
        let radio = CBVirtualRadio(clock: .virtual)
        let (server, client) = CBVirtualRadio.withCurrent(radio) {
            (EchoServerPeripheral(queue: DispatchQueue(label: "echo-server")), EchoClientCentral(queue: DispatchQueue(label: "echo-client")))
        }
        #expect(radio.run(until: { client.isReady }, timeout: .seconds(30)))
        client.send("hello")
        #expect(radio.run(until: { client.echoed.count >= 7 }, timeout: .seconds(10)))
        #expect(client.echoed == Data("hello\n\0".utf8))
        #expect(server.received == [Data("hello\n\0".utf8)])
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
        // The switch moves only with the confirmation: off only once the confirmation is in.
        // (Read in this order: both change together, and the round trip may already be done —
        // the radio's loop runs on another thread even while virtual time stands still.)
        let switchIsOn = remote.switchIsOn
        #expect(switchIsOn || remote.confirmed.count == 2)
        #expect(radio.run(until: { !remote.switchIsOn }, timeout: .seconds(10)))
        #expect(!led.ledIsOn)
        #expect(remote.confirmed == [RemoteLedPeripheral.ledOn, RemoteLedPeripheral.ledOff])
        #expect(led.log.all == ["advertising as LedRemote", "Turning LED on", "Turning LED off"])
    }

    @Test func ledRemoteTogglesAndIsDone() {
        let radio = CBVirtualRadio(clock: .virtual)
        let (led, remote) = CBVirtualRadio.withCurrent(radio) {
            (RemoteLedPeripheral(queue: DispatchQueue(label: "led")),
             LedRemoteCentral(toggles: 3, queue: DispatchQueue(label: "remote")))
        }
        #expect(radio.run(until: { remote.isDone }, timeout: .seconds(30)))
        // On, then three toggles: off, on, off.
        #expect(remote.confirmed == [1, 2, 1, 2])
        #expect(!remote.switchIsOn)
        #expect(!led.ledIsOn)
    }
}
