import ATT
import AssignedNumbers
import GATT
import Testing

/// Robust caching (Core spec Vol 3 Part G §2.5.2.1): after the database changes, a client that
/// set the Robust Caching bit is change-unaware until it confirms Service Changed, or sends a
/// request after reading the Database Hash or after getting Database Out Of Sync.
@Suite("GATT server: robust caching")
struct GATTRobustCachingTests {
    /// Adds a service at run time: the database changes.
    func change(_ f: Fixture) {
        _ = try! f.server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x181A), characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A6E), properties: .read, permissions: .readable, value: .stored([1, 2])),
        ]))
    }

    @Test("A change-unaware client gets Database Out Of Sync once, then is served")
    func outOfSyncThenAware() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "12 0b00 01", "13")  // Robust Caching on
        change(f)
        // Read of 0x0010 (Battery Level 0x64): refused with 0x12 and handle 0x0000.
        expectExchange(f.server, f.connection, "0a 1000", "01 0a 0000 12")
        // The next request makes the client change-aware and is served.
        expectExchange(f.server, f.connection, "0a 1000", "0b 64")
        expectExchange(f.server, f.connection, "0a 1000", "0b 64")
    }

    @Test("Commands from a change-unaware client are ignored")
    func commandsIgnoredWhileUnaware() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "12 0b00 01", "13")
        change(f)
        // Write Command to 0x001E (4 octets, writable): ignored while unaware.
        expectExchange(f.server, f.connection, "52 1e00 01020304", nil)
        expectExchange(f.server, f.connection, "0a 1e00", "01 0a 0000 12")
        expectExchange(f.server, f.connection, "0a 1e00", "0b 00000000")
        expectExchange(f.server, f.connection, "52 1e00 01020304", nil)
        expectExchange(f.server, f.connection, "0a 1e00", "0b 01020304")
    }

    @Test("Reading the Database Hash by type is served; the next request is too")
    func readingTheHashMakesTheClientAware() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "12 0b00 01", "13")
        change(f)
        // Read By Type 0x0001–0xFFFF, type 0x2B2A: one 18-octet entry (handle 0x000D + hash).
        let responses = exchange(f.server, f.connection, "08 0100 ffff 2a2b")
        #expect(responses.first?.prefix(4) == [0x09, 18, 0x0D, 0x00])
        #expect(responses.first?.dropFirst(4).elementsEqual(f.server.databaseHash) == true)
        expectExchange(f.server, f.connection, "0a 1000", "0b 64")
    }

    @Test("A confirmed Service Changed indication makes the client aware")
    func confirmedServiceChanged() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "12 0b00 01", "13")
        expectExchange(f.server, f.connection, "12 0900 0200", "13")  // indications of Service Changed
        change(f)
        #expect(f.connection.unconfirmedIndications == 1)
        f.connection.confirm()
        expectExchange(f.server, f.connection, "0a 1000", "0b 64")
    }

    @Test("Clients without Robust Caching are never refused")
    func withoutRobustCaching() {
        let f = Fixture()
        change(f)
        expectExchange(f.server, f.connection, "0a 1000", "0b 64")
        expectExchange(f.server, f.connection, "52 1e00 0a0b0c0d", nil)
        expectExchange(f.server, f.connection, "0a 1e00", "0b 0a0b0c0d")
    }
}
