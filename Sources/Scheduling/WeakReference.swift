/// A weak reference in an object of its own, for handlers that run once per packet.
///
/// A `[weak self]` capture is stored as a mutable box in the closure's context, and every read
/// of it is a dynamic exclusivity check (`swift_beginAccess`, ~150 instructions with its end)
/// before the weak load. This field is a `weak let`: the closure holds the box strongly and
/// reads the reference without the check. The object is not kept alive, as with `[weak self]`.
public final class WeakReference<Object: AnyObject & Sendable>: Sendable {
    public weak let object: Object?

    public init(_ object: Object) { self.object = object }
}
