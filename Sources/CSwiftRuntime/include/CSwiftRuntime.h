#ifndef CSWIFTRUNTIME_H
#define CSWIFTRUNTIME_H

// From the Swift runtime (libswiftCore), part of its stable ABI on every platform: retains a
// native Swift object unless its deinitialisation has begun, and returns it (NULL if it has).
// It takes and returns the object's pointer (HeapObject *), with the C calling convention.
void *_Nullable swift_tryRetain(void *_Nonnull object);

// Also of the stable ABI: whether a native Swift object's deinitialisation has begun (no
// retain taken; the object's memory must still be allocated).
_Bool swift_isDeallocating(void *_Nonnull object);

#endif
