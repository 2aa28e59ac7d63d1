import Foundation
import HCI

extension LEPHY {
    /// Air time of a packet carrying `octets` of PDU (header + payload + MIC), in nanoseconds
    /// (Vol 6 Part B §2.1 packet formats; Coded uses S=8).
    public func airTimeNanoseconds(pduOctets octets: Int) -> Int64 {
        switch self {
        case .le1M: Int64((1 + 4 + octets + 3) * 8) * 1000
        case .le2M: Int64((2 + 4 + octets + 3) * 8) * 500
        // 80 µs preamble, 256 µs access address, 16 µs CI, 24 µs TERM1, then 8 µs per bit of
        // PDU + CRC, then 24 µs TERM2.
        case .leCoded: (80 + 256 + 16 + 24 + Int64((octets + 3) * 8) * 8 + 24) * 1000
        }
    }
}

/// How time passes on the radio.
public enum AirTimeMode: Sendable, Equatable {
    /// No air time: packets arrive as soon as the loop gets to them, throughput is bound only by
    /// the CPU. Advertising still happens at its intervals. For tests and the stack benchmark.
    case instant
    /// Air time per PDU by PHY and length, connection events at the connection interval, several
    /// PDUs per event with the 150 µs inter-frame space. For realistic behaviour.
    case timed
}

/// A device's place in the simulated space, in metres.
public struct RadioPosition: Sendable, Hashable {
    public var x: Double, y: Double, z: Double
    public init(x: Double = 0, y: Double = 0, z: Double = 0) { self.x = x; self.y = y; self.z = z }
    public func distance(to other: RadioPosition) -> Double {
        ((x - other.x) * (x - other.x) + (y - other.y) * (y - other.y) + (z - other.z) * (z - other.z)).squareRoot()
    }
}

/// Log-distance path loss: RSSI(d) = measured power at 1 m − 10·n·log10(d) + noise.
///
/// The defaults give −59 dBm at 1 m (a typical phone-class transmitter) and free-space
/// exponent 2; a receiver hears nothing below `sensitivity`.
public struct PathLossModel: Sendable, Equatable {
    public var measuredPowerAt1m: Double
    public var exponent: Double
    /// Standard deviation of Gaussian noise added to each RSSI sample, in dB (0: none).
    public var noiseSigma: Double
    public var sensitivity: Double

    public init(measuredPowerAt1m: Double = -59, exponent: Double = 2, noiseSigma: Double = 0, sensitivity: Double = -100) {
        self.measuredPowerAt1m = measuredPowerAt1m
        self.exponent = exponent
        self.noiseSigma = noiseSigma
        self.sensitivity = sensitivity
    }

    /// Mean RSSI at `distance` metres (distances under 10 cm count as 10 cm).
    public func meanRSSI(distance: Double, txPowerOffset: Double = 0) -> Double {
        measuredPowerAt1m + txPowerOffset - 10 * exponent * log10(max(distance, 0.1))
    }

    /// The distance at which the mean RSSI is `rssi` (the inverse of `meanRSSI`).
    public func distance(forRSSI rssi: Double) -> Double {
        pow(10, (measuredPowerAt1m - rssi) / (10 * exponent))
    }
}
