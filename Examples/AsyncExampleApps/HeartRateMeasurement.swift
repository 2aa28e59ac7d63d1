import Foundation

/// One Heart Rate Measurement (characteristic 2A37, GATT Specification Supplement §3.113): the
/// rate, and what the flags byte says follows it.
public struct HeartRateMeasurement: Equatable, Sendable {
    /// Beats per minute.
    public var bpm: Int
    /// Whether the sensor touches the skin; nil when the sensor cannot tell.
    public var sensorContact: Bool?
    /// Energy expended since the last reset, in kilojoules, when sent.
    public var energyExpended: Int?
    /// Times between beats, in 1/1024 s, oldest first.
    public var rrIntervals: [Int]

    public init(bpm: Int, sensorContact: Bool? = nil, energyExpended: Int? = nil, rrIntervals: [Int] = []) {
        self.bpm = bpm
        self.sensorContact = sensorContact
        self.energyExpended = energyExpended
        self.rrIntervals = rrIntervals
    }

    /// Decodes the characteristic's value; nil when it is shorter than its flags say.
    public init?(_ value: Data) {
        let bytes = [UInt8](value)
        guard let flags = bytes.first else { return nil }
        var index = 1
        func uint16() -> Int? {
            guard index + 2 <= bytes.count else { return nil }
            defer { index += 2 }
            return Int(bytes[index]) | Int(bytes[index + 1]) << 8
        }
        if flags & 0x01 == 0 {
            guard index < bytes.count else { return nil }
            bpm = Int(bytes[index])
            index += 1
        } else {
            guard let value = uint16() else { return nil }
            bpm = value
        }
        // Bit 2: contact is supported; bit 1: contact is detected.
        sensorContact = flags & 0x04 != 0 ? flags & 0x02 != 0 : nil
        if flags & 0x08 != 0 {
            guard let energy = uint16() else { return nil }
            energyExpended = energy
        } else {
            energyExpended = nil
        }
        rrIntervals = []
        if flags & 0x10 != 0 {
            while let interval = uint16() { rrIntervals.append(interval) }
        }
    }

    /// The characteristic's value: the rate in one byte when it fits, else two.
    public var encoded: Data {
        var flags: UInt8 = bpm > 0xFF ? 0x01 : 0
        if let sensorContact { flags |= 0x04 | (sensorContact ? 0x02 : 0) }
        if energyExpended != nil { flags |= 0x08 }
        if !rrIntervals.isEmpty { flags |= 0x10 }
        var bytes = [flags]
        func append16(_ value: Int) { bytes += [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF)] }
        if bpm > 0xFF { append16(bpm) } else { bytes.append(UInt8(bpm)) }
        if let energyExpended { append16(energyExpended) }
        for interval in rrIntervals { append16(interval) }
        return Data(bytes)
    }
}

/// Where a sensor is worn: Body Sensor Location (characteristic 2A38).
public enum BodySensorLocation: UInt8, Sendable, CustomStringConvertible {
    case other, chest, wrist, finger, hand, earLobe, foot

    public var description: String {
        switch self {
        case .other: "other"
        case .chest: "chest"
        case .wrist: "wrist"
        case .finger: "finger"
        case .hand: "hand"
        case .earLobe: "ear lobe"
        case .foot: "foot"
        }
    }
}
