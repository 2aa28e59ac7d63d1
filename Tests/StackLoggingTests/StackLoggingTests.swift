import Logging
import LogTesting
import StackLogging
import Testing

@Suite("Stack logging: labels, CB_LOG, link metadata")
struct StackLoggingTests {
    @Test func oneLabelPerLayer() {
        #expect(LogLayer.allCases.map(\.label) == [
            "corebluetooth.hci", "corebluetooth.controller", "corebluetooth.l2cap",
            "corebluetooth.att", "corebluetooth.gatt", "corebluetooth.smp", "corebluetooth.api", "corebluetooth.daemon",
        ])
        let capture = LogCapture()
        for layer in LogLayer.allCases { capture.logger(layer).info("hello") }
        #expect(capture.records.map(\.label) == LogLayer.allCases.map(\.label))
    }

    @Test func cbLogPicksTheLevel() {
        // Unset or empty: the default (nil here).
        #expect(StackLogging.level(cbLog: nil) == nil)
        #expect(StackLogging.level(cbLog: "") == nil)
        #expect(StackLogging.level(cbLog: " ") == nil)
        // 0: quiet, not even why a device is unusable (error).
        #expect(StackLogging.level(cbLog: "0") == .critical)
        // 1 (or any other word): the stack's diagnostics, without the per-packet trace.
        #expect(StackLogging.level(cbLog: "1") == .debug)
        #expect(StackLogging.level(cbLog: "yes") == .debug)
        // A level's name, any case.
        let names: [(String, Logger.Level)] = [
            ("trace", .trace), ("debug", .debug), ("info", .info), ("notice", .notice), ("warning", .warning),
            ("error", .error), ("critical", .critical), ("DEBUG", .debug), ("Info", .info),
        ]
        for (name, level) in names { #expect(StackLogging.level(cbLog: name) == level, "\(name)") }
    }

    @Test func theLevelFiltersBeforeTheHandler() {
        let capture = LogCapture()
        var logger = capture.logging.logger(.att)
        logger.logLevel = .warning
        var built = 0
        func message(_ text: String) -> Logger.Message {
            built += 1
            return "\(text)"
        }
        logger.debug(message("dropped"))
        logger.warning(message("timed out"))
        #expect(capture.records.map(\.message) == ["timed out"])
        // The message of a record below the level is never built.
        #expect(built == 1)
        // A StackLogging's level is its loggers' level.
        var quiet = capture.logging
        quiet.level = .error
        #expect(quiet.logger(.api).logLevel == .error)
    }

    @Test func aLinkLoggerCarriesTheConnection() throws {
        let capture = LogCapture()
        let logger = capture.logging.logger(.l2cap, connection: 0x0040, peer: "C0:FF:EE:00:00:01 (random)", role: "central")
        logger.debug("dropped a PDU for unknown channel 0x0021")
        let record = try #require(capture.records.first)
        #expect(record.label == "corebluetooth.l2cap")
        #expect(record.metadata["connection"] == "0x0040")
        #expect(record.metadata["peer"] == "C0:FF:EE:00:00:01 (random)")
        #expect(record.metadata["role"] == "central")
        #expect(record.description == "debug corebluetooth.l2cap [connection=0x0040 peer=C0:FF:EE:00:00:01 (random) role=central] "
            + "dropped a PDU for unknown channel 0x0021")
        #expect(Logger.hex(0x1) == "0x0001" && Logger.hex(0xFFFF) == "0xffff")
    }
}
