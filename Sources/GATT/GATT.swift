// The GATT server and client land here.
