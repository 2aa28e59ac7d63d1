import Foundation

/// A point on the floor plan, in metres.
public struct Point: Sendable, Hashable, CustomStringConvertible {
    public var x: Double
    public var y: Double
    public init(x: Double, y: Double) { self.x = x; self.y = y }
    public func distance(to other: Point) -> Double { ((x - other.x) * (x - other.x) + (y - other.y) * (y - other.y)).squareRoot() }
    public var description: String { String(format: "(%.2f, %.2f)", x, y) }
}

/// The book's ch. 11 ranging math (book-apps.md §2.33–2.34), with its bugs fixed.
public enum Ranging {
    /// Distance in metres from an RSSI by log-distance path loss: d = 10^((A − R) / (10·n)), with
    /// A the RSSI at 1 m (the beacon's measured power), R the RSSI now, n the propagation
    /// constant (2 in free space; "2.7 in a poor environment" to "4.3 in an ideal" one, says
    /// the book). Nil for a non-finite input or n ≤ 0.
    public static func distance(rssi: Double, measuredPower: Double, propagationConstant n: Double) -> Double? {
        guard rssi.isFinite, measuredPower.isFinite, n.isFinite, n > 0 else { return nil }
        let d = pow(10, (measuredPower - rssi) / (10 * n))
        return d.isFinite ? d : nil
    }

    /// The point at distances r1, r2, r3 from p1, p2, p3 (trilateration in the plane):
    /// with êx = (p2 − p1)/d, i = êx·(p3 − p1), êy = (p3 − p1 − i·êx)/‖p3 − p1 − i·êx‖ and
    /// j = êy·(p3 − p1) — the book's code gets j wrong — x = (r1² − r2² + d²)/(2d),
    /// y = (r1² − r3² + i² + j²)/(2j) − (i/j)·x, the point is p1 + x·êx + y·êy.
    /// Nil when the beacons are (nearly) on one line or a distance is negative or not finite.
    public static func trilaterate(_ p1: Point, _ r1: Double, _ p2: Point, _ r2: Double,
                                   _ p3: Point, _ r3: Double) -> Point? {
        let values = [p1.x, p1.y, p2.x, p2.y, p3.x, p3.y, r1, r2, r3]
        guard values.allSatisfy(\.isFinite), r1 >= 0, r2 >= 0, r3 >= 0 else { return nil }
        let d = p1.distance(to: p2)
        guard d > 1e-9 else { return nil }
        let ex = Point(x: (p2.x - p1.x) / d, y: (p2.y - p1.y) / d)
        let i = ex.x * (p3.x - p1.x) + ex.y * (p3.y - p1.y)
        let ey0 = Point(x: p3.x - p1.x - i * ex.x, y: p3.y - p1.y - i * ex.y)
        let eyNorm = (ey0.x * ey0.x + ey0.y * ey0.y).squareRoot()
        // p3 on the line through p1 and p2: no second axis.
        guard eyNorm > 1e-9 * max(1, d) else { return nil }
        let ey = Point(x: ey0.x / eyNorm, y: ey0.y / eyNorm)
        let j = ey.x * (p3.x - p1.x) + ey.y * (p3.y - p1.y)
        let x = (r1 * r1 - r2 * r2 + d * d) / (2 * d)
        let y = (r1 * r1 - r3 * r3 + i * i + j * j) / (2 * j) - (i / j) * x
        let result = Point(x: p1.x + x * ex.x + y * ey.x, y: p1.y + x * ex.y + y * ey.y)
        return result.x.isFinite && result.y.isFinite ? result : nil
    }
}
