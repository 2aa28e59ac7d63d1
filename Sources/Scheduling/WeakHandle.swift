import CSwiftRuntime

/// A reference that does not keep its object alive and reads `nil` once the object's
/// deinitialisation has begun, as `weak` does, without the side table a weak reference gives its
/// object.
///
/// An object that was ever referenced weakly keeps its reference counts in a side table, and
/// every retain and release of it takes the runtime's slow path from then on: the stack's
/// objects on the packet path are retained and released a dozen times a packet. This handle
/// keeps an unowned reference instead (counted in the object's own header: its memory stays
/// allocated while a handle exists, though its deinit runs as usual) and asks the runtime
/// (`swift_tryRetain`) whether the object is still alive when it is read. Reading it costs
/// one atomic operation, as a weak load does; there is no exclusivity check, as with a
/// `[weak self]` capture (a mutable box in the closure's context).
///
/// Native Swift classes only (every class of this package); not for Objective-C objects.
public struct WeakHandle<Object: AnyObject> {
    /// Keeps the object's memory (not the object) alive for `pointer`.
    @usableFromInline let keeper: MemoryKeeper
    @usableFromInline let pointer: UnsafeMutableRawPointer

    @inlinable
    public init(_ object: Object) {
        keeper = MemoryKeeper(object)
        pointer = Unmanaged.passUnretained(object).toOpaque()
    }

    /// The object, retained for the caller, or nil once its deinitialisation has begun.
    @inlinable @inline(__always)
    public var object: Object? { retainedIfAlive(pointer, as: Object.self) }
}

/// `@unchecked Sendable` when the object is: the stored fields never change, and the runtime's
/// unowned and strong counts are atomic; the handle hands out the object itself, which must be
/// `Sendable` to cross threads.
extension WeakHandle: @unchecked Sendable where Object: Sendable {}

/// The object at `pointer`, retained for the caller, or nil once its deinitialisation has
/// begun. The memory must still be allocated (an unowned reference keeps it).
@inlinable @inline(__always)
func retainedIfAlive<Object: AnyObject>(_ pointer: UnsafeMutableRawPointer, as: Object.Type) -> Object? {
    guard let retained = swift_tryRetain(pointer) else { return nil }
    return Unmanaged<Object>.fromOpaque(retained).takeRetainedValue()
}

/// A `weak var` without the side table (`WeakHandle`): `@WeakHeld var link: L2CAPLink?`.
///
/// The keeper and the pointer are separate fields so that a read touches the pointer only:
/// copying an unowned reference out of a class's property costs two atomic operations.
@propertyWrapper
public struct WeakHeld<Object: AnyObject> {
    @usableFromInline var keeper: MemoryKeeper?
    @usableFromInline var pointer: UnsafeMutableRawPointer?

    @inlinable public init(wrappedValue: Object?) { self.wrappedValue = wrappedValue }

    @inlinable public var wrappedValue: Object? {
        @inline(__always) get {
            guard let pointer else { return nil }
            return retainedIfAlive(pointer, as: Object.self)
        }
        set {
            keeper = newValue.map { MemoryKeeper($0) }
            pointer = newValue.map { Unmanaged.passUnretained($0).toOpaque() }
        }
    }
}

extension WeakHeld: @unchecked Sendable where Object: Sendable {}

/// A `weak var` of a class-bound protocol type (`(any HCIDriverDelegate)?`) without the side
/// table (`WeakHandle`): `@WeakHeldExistential var delegate: (any HCIDriverDelegate)?`.
///
/// The existential is kept as its bits, unretained (what `unowned(unsafe)` keeps: the object's
/// pointer and the protocol's witness table), and copied out (retained) only while the object is
/// alive. Only for existentials of one class-bound protocol (checked: two words), never for a
/// struct.
@propertyWrapper
public struct WeakHeldExistential<Value> {
    @usableFromInline var keeper: MemoryKeeper?
    /// The existential's words; the first is the object's pointer (0: nil).
    @usableFromInline var bits: (UInt, UInt) = (0, 0)

    @inlinable public init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }

    @inlinable public var wrappedValue: Value? {
        @inline(__always) get {
            let bits = bits  // the closure below must not capture self (a copy of the keeper)
            guard let pointer = UnsafeMutableRawPointer(bitPattern: bits.0),
                  swift_tryRetain(pointer) != nil else { return nil }
            // The retain tryRetain took becomes the value's own: its bits are moved (not
            // copied: a second retain, and a release of the first) into an existential.
            return withUnsafeTemporaryAllocation(of: Value.self, capacity: 1) { slot in
                let raw = UnsafeMutableRawPointer(slot.baseAddress!)
                raw.storeBytes(of: bits, as: (UInt, UInt).self)
                return slot.baseAddress!.move()
            }
        }
        set {
            precondition(MemoryLayout<Value>.size == MemoryLayout<(UInt, UInt)>.size,
                         "WeakHeldExistential holds existentials of one class-bound protocol")
            guard let newValue else {
                keeper = nil
                bits = (0, 0)
                return
            }
            bits = withUnsafeBytes(of: newValue) { $0.load(as: (UInt, UInt).self) }
            keeper = MemoryKeeper(Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer(bitPattern: bits.0)!).takeUnretainedValue())
            extendLifetime(newValue)
        }
    }
}

extension WeakHeldExistential {
    /// Whether the object is set and its deinitialisation has not begun, without retaining it
    /// (what a read costs, and its release, when only the answer is wanted).
    @inlinable public var isAlive: Bool {
        guard let pointer = UnsafeMutableRawPointer(bitPattern: bits.0) else { return false }
        return !swift_isDeallocating(pointer)
    }
}

/// `@unchecked Sendable` when the protocol is: as `WeakHandle`; `bits` are plain words.
extension WeakHeldExistential: @unchecked Sendable where Value: Sendable {}

/// An unowned reference: keeps an object's memory allocated, not the object alive. A struct of
/// its own rather than an `unowned(safe) var keeper: AnyObject?` field: Swift 6.3 at -Onone
/// mishandled that optional unowned field in these generic structs (assigning it corrupted the
/// memory beside it: an array of them iterated past its end; WeakHandleTests).
@usableFromInline
struct MemoryKeeper {
    @usableFromInline unowned(safe) let object: AnyObject
    @inlinable init(_ object: AnyObject) { self.object = object }
}
